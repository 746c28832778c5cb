"""Study specs: a dict, or a YAML/JSON file, in the CLI's study-file format, as a Study proto.

The format is the `Study` message (or a bare `StudySpec`: a top level with `metrics` or
`parameters` and no `spec`) in protobuf JSON, or the same structure in YAML, exactly as
`evoscale study create -f FILE` reads it (service/cli/study_file.cc):

    {"metrics": [{"name": "logloss", "goal": "MINIMIZE"}],
     "parameters": [{"name": "lr", "double_spec": {"min": 1e-4, "max": 0.1}, "scale": "LOG"},
                    {"name": "layers", "integer_spec": {"min": 1, "max": 4}},
                    {"name": "dim", "discrete_spec": {"values": [8, 16, 32]}},
                    {"name": "opt", "categorical_spec": {"values": ["adam", "sgd"]}}],
     "algorithm": {"algorithm": "GENETIC", "seed": 7, "settings": {"population_size": 12}},
     "max_trials": 48}

As in the CLI, YAML follows the YAML 1.2 core schema, and a plain (unquoted) scalar that fills a
string field stays text: `values: [32, 64]` of a categorical_spec, or `population_size: 12` in
settings, are the strings "32", "64" and "12". A dict given in Python is read the same way: a
number where a string is wanted becomes its text.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from typing import Any, Union

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from evoscale.errors import InvalidArgumentError
from evoscale.v1 import study_pb2

SpecLike = Union[Mapping[str, Any], str, "os.PathLike[str]", study_pb2.StudySpec, study_pb2.Study]

# Bounds on what one document may expand to (YAML aliases can nest a node in itself).
_MAX_DEPTH = 64

_YAML_NUMBER = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_YAML_INT = re.compile(r"[-+]?[0-9]+")


def study_from_spec(display_name: str, spec: SpecLike) -> study_pb2.Study:
    """The Study to create: `spec` (dict, file path or proto) with `display_name` set.

    A whole Study document (with `spec`, and maybe `metadata` and `display_name`) is accepted
    too; the `display_name` argument wins over the document's. Raises InvalidArgumentError
    (a ValueError) naming the file and the field on a bad document.
    """
    if isinstance(spec, study_pb2.Study):
        study = study_pb2.Study()
        study.CopyFrom(spec)
    elif isinstance(spec, study_pb2.StudySpec):
        study = study_pb2.Study(spec=spec)
    elif isinstance(spec, (str, os.PathLike)):
        study = study_from_document(load_study_file(spec), os.fspath(spec))
    elif isinstance(spec, Mapping):
        study = study_from_document(spec, "spec")
    else:
        raise TypeError(
            f"spec: want a dict, a path to a YAML/JSON study file or a StudySpec, "
            f"got {type(spec).__name__}"
        )
    study.display_name = display_name
    return study


def load_study_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Reads a YAML or JSON study file (by extension, else `{` first means JSON) as a dict."""
    source = os.fspath(path)
    with open(source, encoding="utf-8") as f:
        text = f.read()
    lower = source.lower()
    is_json = lower.endswith(".json") or (
        not lower.endswith((".yaml", ".yml")) and text.lstrip().startswith("{")
    )
    if not text.strip():
        raise InvalidArgumentError(f'study file "{source}": the file holds no study')
    if is_json:
        try:
            document = json.loads(text)
        except json.JSONDecodeError as e:
            raise InvalidArgumentError(f'study file "{source}": invalid JSON: {e}') from None
    else:
        document = _load_yaml(text, source)
    if not isinstance(document, dict):
        raise InvalidArgumentError(f'study file "{source}": expected a mapping of Study fields')
    return document


def study_from_document(document: Mapping[str, Any], source: str) -> study_pb2.Study:
    """A Study from a dict of Study (or bare StudySpec) fields; `source` names it in errors."""
    if not isinstance(document, Mapping):
        raise InvalidArgumentError(f'study "{source}": expected a mapping of Study fields')
    document = dict(document)
    if "spec" not in document and ("metrics" in document or "parameters" in document):
        document = {"spec": document}
    coerced = _coerce_mapping(document, study_pb2.Study.DESCRIPTOR, depth=0)
    study = study_pb2.Study()
    try:
        json_format.ParseDict(coerced, study, ignore_unknown_fields=False)
    except json_format.ParseError as e:
        raise InvalidArgumentError(f'study "{source}": not a valid Study: {e}') from None
    return study


# ---- Python values: numbers in string fields become their text ------------------------------


def _is_string_field(field: FieldDescriptor | None) -> bool:
    return field is not None and field.type in (
        FieldDescriptor.TYPE_STRING,
        FieldDescriptor.TYPE_BYTES,
    )


def _is_map(field: FieldDescriptor | None) -> bool:
    return (
        field is not None
        and field.type == FieldDescriptor.TYPE_MESSAGE
        and field.message_type.GetOptions().map_entry
    )


def _is_repeated(field: FieldDescriptor | None) -> bool:
    return field is not None and field.label == FieldDescriptor.LABEL_REPEATED


def _find_field(message: Descriptor | None, key: str) -> FieldDescriptor | None:
    if message is None:
        return None
    field = message.fields_by_name.get(key)
    if field is None:
        field = message.fields_by_camelcase_name.get(key)
    return field


def _coerce_mapping(
    value: Mapping[str, Any], message: Descriptor | None, depth: int,
    map_value: FieldDescriptor | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if map_value is not None:
            out[str(key)] = _coerce(item, map_value, element=True, depth=depth + 1)
        else:
            out[key] = _coerce(item, _find_field(message, key), element=False, depth=depth + 1)
    return out


def _coerce(value: Any, field: FieldDescriptor | None, element: bool, depth: int) -> Any:
    """`value` for `field` (None: unknown); `element`: one element of a repeated field or a
    map's value."""
    if depth > _MAX_DEPTH:
        raise InvalidArgumentError(f"spec nested deeper than {_MAX_DEPTH} levels")
    if isinstance(value, Mapping):
        if _is_map(field) and not element:
            return _coerce_mapping(value, None, depth, field.message_type.fields_by_name["value"])
        if field is not None and field.type == FieldDescriptor.TYPE_MESSAGE and (
            element or not _is_repeated(field)
        ):
            return _coerce_mapping(value, field.message_type, depth)
        return _coerce_mapping(value, None, depth)
    if isinstance(value, (list, tuple)):
        whole = _is_repeated(field) and not element
        return [_coerce(v, field if whole else None, element=whole, depth=depth + 1) for v in value]
    if _is_string_field(field) and (element or not _is_repeated(field)):
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return str(value)
    return value


# ---- YAML, read as the CLI reads it -----------------------------------------------------------


def _load_yaml(text: str, source: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise ImportError(
            "reading a YAML study file needs PyYAML (Debian: apt-get install python3-yaml)"
        ) from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        raise InvalidArgumentError(f'study file "{source}": {e}') from None
    if root is None:
        raise InvalidArgumentError(f'study file "{source}": the file holds no study')
    try:
        return _yaml_value(root, None, element=False, depth=0, yaml=yaml)
    except _YamlProblem as e:
        raise InvalidArgumentError(f'study file "{source}": {e}') from None


class _YamlProblem(Exception):
    pass


def _where(node: Any) -> str:
    mark = node.start_mark
    return f"line {mark.line + 1}, column {mark.column + 1}: "


def _yaml_value(
    node: Any, field: FieldDescriptor | None, element: bool, depth: int, yaml: Any
) -> Any:
    """The JSON value of a YAML node; the top level is read as Study fields."""
    if depth > _MAX_DEPTH:
        raise _YamlProblem(f"{_where(node)}nested deeper than {_MAX_DEPTH} levels")
    if isinstance(node, yaml.ScalarNode):
        string_field = _is_string_field(field) and (element or not _is_repeated(field))
        return _yaml_scalar(node, string_field)
    if isinstance(node, yaml.SequenceNode):
        whole = _is_repeated(field) and not element
        item_field = field if whole else None
        return [_yaml_value(item, item_field, whole, depth + 1, yaml) for item in node.value]
    # A mapping: Study fields at the top, a message's fields, a protobuf map, or unknown.
    if depth == 0:
        keys = {k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)}
        bare_spec = "spec" not in keys and ("metrics" in keys or "parameters" in keys)
        message = (study_pb2.StudySpec if bare_spec else study_pb2.Study).DESCRIPTOR
        map_value = None
    elif _is_map(field) and not element:
        message, map_value = None, field.message_type.fields_by_name["value"]
    elif field is not None and field.type == FieldDescriptor.TYPE_MESSAGE and (
        element or not _is_repeated(field)
    ):
        message, map_value = field.message_type, None
    else:
        message, map_value = None, None
    out: dict[str, Any] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            kind = "map keys must be scalars" if map_value else "mapping keys must be plain names"
            raise _YamlProblem(f"{_where(key_node)}{kind}")
        key = key_node.value
        if key in out:
            raise _YamlProblem(f'{_where(key_node)}key "{key}" given twice')
        if map_value is not None:
            out[key] = _yaml_value(value_node, map_value, True, depth + 1, yaml)
        else:
            out[key] = _yaml_value(value_node, _find_field(message, key), False, depth + 1, yaml)
    return out


def _yaml_scalar(node: Any, string_field: bool) -> Any:
    text: str = node.value
    if node.style is not None:  # quoted or block: always a string
        return text
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if string_field:
        return text
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    return _yaml_number(text)


def _yaml_number(text: str) -> Any:
    """A YAML 1.2 core-schema number as a JSON value (infinities and NaN as protobuf JSON's
    strings), or the text when it is no number."""
    if text in (".nan", ".NaN", ".NAN"):
        return "NaN"
    body = text.lstrip("+-")
    if len(text) - len(body) <= 1 and body in (".inf", ".Inf", ".INF"):
        return "-Infinity" if text.startswith("-") else "Infinity"
    if re.fullmatch(r"0o[0-7]+", text):
        return int(text[2:], 8)
    if re.fullmatch(r"0x[0-9a-fA-F]+", text):
        return int(text[2:], 16)
    if _YAML_INT.fullmatch(text):
        return int(text)
    if _YAML_NUMBER.fullmatch(text):
        value = float(text)
        return text if math.isinf(value) else value  # 1e999: not a number protobuf takes
    return text
