"""Validates a `glovebox export` document against the official SDKs' types.

usage: check_export.py FORMAT FILE [FORMAT FILE]...
       (FORMAT: openai | openai-responses | anthropic | mcp)

Each tool is validated with pydantic's TypeAdapter against the SDK type
(openai.types.chat.ChatCompletionToolParam, openai.types.responses.
FunctionToolParam, anthropic.types.ToolParam, mcp.types.Tool). TypedDict
validation accepts unknown keys silently, so the keys are also compared,
recursively, with the TypedDict's own fields (Required[...] ones must be
present, nothing else may appear); for the pydantic models of `mcp` (which
allow extra fields) with the model's fields and aliases. Prints, per file,
"FILE: ok N" when it conforms, else one "FILE: <violation>" line per
violation; exits 1 when any file does not conform. (Several files per run:
importing the SDKs takes seconds.)
"""

import collections.abc
import json
import sys
import typing

import pydantic
import typing_extensions

import anthropic.types
import mcp.types
import openai.types.chat
import openai.types.responses


def _is_typeddict(t):
    return typing_extensions.is_typeddict(t)


def _unwrap(hint):
    """Strips Required/NotRequired/ReadOnly/Annotated; returns (hint, required?)."""
    required = None
    while True:
        origin = typing.get_origin(hint)
        if origin in (typing_extensions.Required, getattr(typing, "Required", None)):
            required = True
        elif origin in (typing_extensions.NotRequired, getattr(typing, "NotRequired", None)):
            required = False
        elif origin in (typing_extensions.ReadOnly, getattr(typing, "ReadOnly", object())):
            pass
        elif origin is typing_extensions.Annotated:
            pass
        else:
            return hint, required
        hint = typing.get_args(hint)[0]


def _candidates(hint):
    """The TypedDicts / models a (possibly Optional/Union/Iterable) hint allows."""
    hint, _ = _unwrap(hint)
    if _is_typeddict(hint) or (isinstance(hint, type) and issubclass(hint, pydantic.BaseModel)):
        return [hint]
    out = []
    for arg in typing.get_args(hint):
        out.extend(_candidates(arg))
    return out


def _free_dict(hint):
    """Whether the hint accepts any mapping (then any key is allowed)."""
    hint, _ = _unwrap(hint)
    if hint in (dict, typing.Dict) or typing.get_origin(hint) in (
        dict,
        collections.abc.Mapping,
    ):
        return True
    return any(_free_dict(a) for a in typing.get_args(hint)) if typing.get_origin(hint) is typing.Union else False


def _iterable_item(hint):
    """X when the hint is Iterable[X] (pydantic validates those lazily)."""
    hint, _ = _unwrap(hint)
    if typing.get_origin(hint) is collections.abc.Iterable:
        return typing.get_args(hint)[0]
    return None


def _strict(value, hint, path, errors):
    """Unknown or missing keys of TypedDicts / models, recursively."""
    item = _iterable_item(hint)
    if item is not None:
        if not isinstance(value, list):
            errors.append(f"{path}: expected a list, got {type(value).__name__}")
            return
        adapter = pydantic.TypeAdapter(item)
        for i, v in enumerate(value):
            try:
                adapter.validate_python(v)
            except pydantic.ValidationError as e:
                errors.append(f"{path}[{i}]: {e}")
    if isinstance(value, dict) and _free_dict(hint):
        return
    if isinstance(value, list):
        inner = [c for c in _candidates(hint)]
        for i, item in enumerate(value):
            if isinstance(item, dict) and inner:
                _strict_one(item, inner, f"{path}[{i}]", errors)
        return
    if isinstance(value, dict):
        cands = _candidates(hint)
        if cands:
            _strict_one(value, cands, path, errors)


def _strict_one(value, candidates, path, errors):
    best = None
    for t in candidates:
        errs = []
        _keys(value, t, path, errs)
        if not errs:
            return
        if best is None or len(errs) < len(best):
            best = errs
    errors.extend(best or [])


def _keys(value, t, path, errors):
    if _is_typeddict(t):
        hints = typing.get_type_hints(t, include_extras=True)
        total = getattr(t, "__total__", True)
        fields = {}
        for k, h in hints.items():
            inner, req = _unwrap(h)
            fields[k] = (inner, total if req is None else req)
    else:
        fields = {}
        for name, f in t.model_fields.items():
            key = f.alias or name
            fields[key] = (f.annotation, f.is_required())
    for k in value:
        if k not in fields:
            errors.append(f"{path}: unknown key {k!r} for {t.__name__} (allowed: {sorted(fields)})")
    for k, (inner, req) in fields.items():
        if req and k not in value:
            errors.append(f"{path}: missing required key {k!r} of {t.__name__}")
        if k in value:
            _strict(value[k], inner, f"{path}.{k}", errors)


TYPES = {
    "openai": openai.types.chat.ChatCompletionToolParam,
    "openai-responses": openai.types.responses.FunctionToolParam,
    "anthropic": anthropic.types.ToolParam,
    "mcp": mcp.types.Tool,
}


def check(fmt, doc):
    errors = []
    t = TYPES[fmt]
    if fmt == "mcp":
        if not isinstance(doc, dict) or set(doc) != {"tools"}:
            return ["document: expected exactly {\"tools\": [...]}"], 0
        try:
            mcp.types.ListToolsResult.model_validate(doc)
        except pydantic.ValidationError as e:
            errors.append(f"document: {e}")
        tools = doc["tools"]
    else:
        if not isinstance(doc, list):
            return ["document: expected a JSON array of tools"], 0
        tools = doc
    adapter = pydantic.TypeAdapter(t)
    for i, tool in enumerate(tools):
        try:
            if fmt == "mcp":
                t.model_validate(tool)
            else:
                adapter.validate_python(tool)
        except pydantic.ValidationError as e:
            errors.append(f"tools[{i}]: {e}")
        if isinstance(tool, dict):
            _strict_one(tool, [t], f"tools[{i}]", errors)
        else:
            errors.append(f"tools[{i}]: not an object")
    return errors, len(tools)


def main():
    args = sys.argv[1:]
    if not args or len(args) % 2:
        sys.exit("usage: check_export.py FORMAT FILE [FORMAT FILE]...")
    failed = False
    for fmt, path in zip(args[0::2], args[1::2]):
        with open(path) as f:
            doc = json.load(f)
        errors, n = check(fmt, doc)
        for e in errors:
            print(f"{path}: {e}")
        if errors:
            failed = True
        else:
            print(f"{path}: ok {n}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
