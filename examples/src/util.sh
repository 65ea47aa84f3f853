#!/bin/sh
# TODO: handle paths with spaces
echo "util"
