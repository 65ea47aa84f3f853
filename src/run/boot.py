# glovebox: the bootstrap of a python command (src/run/safepath.rs), run
# as `python3 [options] -c BOOT KIND TARGET args…`. For a tool that
# requires approval, pin.py is compiled before it and VERIFY is its check.
def boot():
    verify = globals().get("VERIFY")
    import sys
    if sys.path[:1] == [""]:
        del sys.path[0]
    import os
    kind, target = sys.argv[1], sys.argv[2]
    del sys.argv[:2]
    if kind == "M":
        import runpy
        try:
            name, spec, code = runpy._get_module_details(target, runpy._Error)
        except runpy._Error as e:
            sys.exit("%s: %s" % (sys.executable, e))
        sys.path.append(os.getcwd())
        sys.argv[0] = spec.origin
        runpy._run_code(code, sys.modules["__main__"].__dict__, None, "__main__", spec)
        return
    if kind == "m":
        import runpy
        sys.path.append(os.getcwd())
        sys.argv[0] = target
        runpy._run_module_as_main(target)
        return
    real = os.path.realpath(target)
    if os.path.isdir(real):
        sys.path.append(real)
        target = os.path.join(real, "__main__.py")
    else:
        sys.path.append(os.path.dirname(real))
    data = verify(target) if verify else None
    if not target.endswith(".py"):
        import runpy
        runpy.run_path(target, run_name="__main__")
        return
    if data is None:
        with open(target, "rb") as f:
            data = f.read()
    code = compile(data, target, "exec", dont_inherit=True)
    main = sys.modules["__main__"].__dict__
    for k in [k for k in main if k not in ("__name__", "__builtins__")]:
        del main[k]
    main.update(__file__=target, __doc__=None, __package__=None, __spec__=None, __loader__=None, __cached__=None)
    exec(code, main)
boot()
