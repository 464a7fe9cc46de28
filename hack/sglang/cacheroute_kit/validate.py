"""`validate MODEL [JSON]` and `validate --batch`: a JSON body judged by
SGLang's own request and response models.

  validate openai.ChatCompletionResponse '{"id": ...}'   (JSON from stdin when omitted)
  validate --batch     JSON lines {"id", "model", "body"} -> {"id", "ok", "errors", "ignored"}

MODEL names one of:
  GenerateReqInput      a /generate request, through what the server runs before
                        it schedules one: FastAPI's parse into the GenerateReqInput
                        dataclass (a 422), the proto contract gate
                        `generate_contract_error` (a 400), then
                        `normalize_batch_and_arguments()` and the sampling
                        parameters' own `normalize` and `verify` (a 400).
  openai.<Class>        a pydantic model of sglang/srt/entrypoints/openai/protocol.py
                        (ChatCompletionRequest/Response, ChatCompletionStreamResponse,
                        CompletionRequest/Response, CompletionStreamResponse,
                        ErrorResponse, ModelList, TokenizeRequest/Response, ...).
  api.<Class>           a proto-generated contract type of sglang/api/v1/api_types.py
                        (GenerateResponse, GenerateMetaInfo, GenerateStreamError,
                        ErrorBody, GetModelInfoResponse, GetServerInfoResponse, ...),
                        decoded with its own `from_json_value`.
  kit.<Name>            a shape the server builds inline, with no model of its own;
                        written out below next to the code it transcribes.

Responses are held strictly: pydantic ignores fields a model does not
declare, so every key is walked against the model's fields, and one the model
does not declare is an error (the server serialises these very models, so it
cannot send one). The proto contract types say "unknown keys ignored" and the
server sends more than they declare (meta_info's cached_tokens_details, every
server arg in /server_info): their undeclared keys are listed under "ignored",
not errors. Requests are judged as the server judges them: extras allowed
where the model allows them.
"""

import json
import sys
import types
import typing

import msgspec
from pydantic import BaseModel, TypeAdapter, ValidationError

# A vocabulary larger than any real one: `verify` checks token ids against the
# served model's, which a request check without a model cannot know.
ANY_VOCAB = 1 << 30


# ---- kit.<Name>: shapes built inline by the server --------------------------


class GenerateContractError(msgspec.Struct, forbid_unknown_fields=True):
    """http_server.generate_request: `{"error": contract_error}`, status 400,
    when `generate_contract_error` refuses a /generate body."""

    error: str


class GenerateError(msgspec.Struct, forbid_unknown_fields=True):
    """http_server: `{"error": {"message": str(e)}}` for a /generate the
    tokenizer manager refuses (ValueError, 400) or an abort."""

    class Body(msgspec.Struct, forbid_unknown_fields=True):
        message: str

    error: Body


class FastApiDetail(msgspec.Struct, forbid_unknown_fields=True):
    """FastAPI's own error body: 404 for an unknown route ({"detail": "Not Found"}),
    422 for a body its parse refuses ({"detail": [...]})."""

    detail: typing.Union[str, typing.List[typing.Any]]


def _load_section_types():
    from sglang.srt.managers import load_snapshot as ls

    return ls


class V1Loads(msgspec.Struct, forbid_unknown_fields=True):
    """v1_loads.get_loads: the dict it returns; each entry of `loads` is
    `LoadSnapshot.to_dict()` (checked against LoadSnapshot in validate_loads)."""

    timestamp: str
    version: str
    accelerator: typing.Optional[str]
    num_accelerators: int
    loads: typing.List[typing.Dict[str, typing.Any]]


KIT_MODELS = {
    "GenerateContractError": GenerateContractError,
    "GenerateError": GenerateError,
    "FastApiDetail": FastApiDetail,
    "V1Loads": V1Loads,
}


# ---- walking a body against a model's declared fields -----------------------


def is_pydantic(tp):
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def is_struct(tp):
    return isinstance(tp, type) and issubclass(tp, msgspec.Struct)


def declared_fields(cls):
    """JSON key -> annotation, for a pydantic model or a msgspec Struct."""
    if is_pydantic(cls):
        out = {}
        for name, field in cls.model_fields.items():
            out[field.alias or name] = field.annotation
        return out
    hints = typing.get_type_hints(cls, globalns=sys.modules[cls.__module__].__dict__)
    return {name: hints.get(name, typing.Any) for name in cls.__struct_fields__}


def model_members(tp):
    """The model classes a field's annotation may hold at this level."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return model_members(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(tp) for m in model_members(a)]
    return [tp] if is_pydantic(tp) or is_struct(tp) else []


def undeclared(tp, value, path):
    """(path, model) of each key in `value` that the annotation `tp` does not declare."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return undeclared(args[0], value, path)
    if origin in (typing.Union, types.UnionType):
        # The member the value fits best: a model for an object, a list for a list.
        best = None
        for arg in args:
            if arg is type(None):
                continue
            if isinstance(value, dict) and not model_members(arg) and typing.get_origin(arg) not in (dict, typing.Dict):
                continue
            found = undeclared(arg, value, path)
            if best is None or len(found) < len(best):
                best = found
        return best or []
    if origin in (list, typing.List, tuple) and isinstance(value, list):
        inner = args[0] if args else typing.Any
        return [p for i, item in enumerate(value) for p in undeclared(inner, item, f"{path}[{i}]")]
    if origin in (dict, typing.Dict) and isinstance(value, dict):
        inner = args[1] if len(args) == 2 else typing.Any
        return [p for k, v in value.items() for p in undeclared(inner, v, f"{path}.{k}")]
    if (is_pydantic(tp) or is_struct(tp)) and isinstance(value, dict):
        if is_pydantic(tp) and tp.model_config.get("extra") == "allow":
            return []
        fields = declared_fields(tp)
        out = []
        for key, v in value.items():
            where = f"{path}.{key}" if path else key
            if key not in fields:
                out.append((where, tp.__name__))
            else:
                out += undeclared(fields[key], v, where)
        return out
    return []


# ---- the checks -------------------------------------------------------------


class ByteTokenizer:
    """Stands in for the served model's tokenizer in SamplingParams.normalize:
    it only counts a stop string's tokens (one a byte here). Without one,
    normalize refuses stop strings as a server started with
    --skip-tokenizer-init would; a real server has its tokenizer."""

    eos_token_id = 0

    def encode(self, text, add_special_tokens=False):
        return list(text.encode("utf-8"))


def check_generate_request(body):
    """What /generate runs before scheduling: (stage, message) or None."""
    from sglang.srt.entrypoints.api_contract import generate_contract_error
    from sglang.srt.managers.io_struct import GenerateReqInput
    from sglang.srt.sampling.sampling_params import SamplingParams

    try:
        obj = TypeAdapter(GenerateReqInput).validate_python(body)
    except ValidationError as e:
        return [f"422 {err['loc']}: {err['msg']}" for err in e.errors()]
    contract = generate_contract_error(body)
    if contract is not None:
        return [f"400 {contract}"]
    try:
        obj.normalize_batch_and_arguments()
        params = obj.sampling_params if isinstance(obj.sampling_params, list) else [obj.sampling_params]
        for sp in params:
            sampling = SamplingParams(**(sp or {}))
            sampling.normalize(ByteTokenizer())
            sampling.verify(ANY_VOCAB)
    except (ValueError, TypeError) as e:
        return [f"400 {e}"]
    return []


def check_pydantic(cls, body, strict_extras):
    try:
        cls.model_validate_json(json.dumps(body), strict=True)
    except ValidationError as e:
        return [f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}" for err in e.errors()], []
    extras = undeclared(cls, body, "") if strict_extras else []
    return [f"{path}: not a field of {model}" for path, model in extras], []


def check_api(cls, body):
    from sglang.api.v1.api_types import JsonContractError

    try:
        cls.from_json_value(body)
    except JsonContractError as e:
        return [str(e)], []
    # "unknown keys ignored" contracts: listed, not refused.
    return [], [path for path, _ in undeclared(cls, body, "")]


def check_loads_entry(entry, where):
    ls = _load_section_types()
    fields = declared_fields(ls.LoadSnapshot)
    errors = []
    for key, value in entry.items():
        if key not in fields:
            errors.append(f"{where}.{key}: not a field of LoadSnapshot")
            continue
        tp = fields[key]
        members = model_members(tp)
        try:
            if members:
                # Sections are array_like on the wire; to_dict() gives them as objects.
                section = members[0]
                if not isinstance(value, dict):
                    raise msgspec.ValidationError(f"expected an object for {section.__name__}")
                sub = declared_fields(section)
                for k, v in value.items():
                    if k not in sub:
                        errors.append(f"{where}.{key}.{k}: not a field of {section.__name__}")
                    else:
                        msgspec.convert(v, sub[k], strict=True)
            else:
                msgspec.convert(value, tp, strict=True)
        except msgspec.ValidationError as e:
            errors.append(f"{where}.{key}: {e}")
    return errors


def check_kit(cls, body):
    try:
        msgspec.convert(body, cls, strict=True)
    except msgspec.ValidationError as e:
        return [str(e)], []
    errors = []
    if cls is V1Loads:
        for i, entry in enumerate(body["loads"]):
            errors += check_loads_entry(entry, f"loads[{i}]")
    return errors, []


def resolve(name):
    if name == "GenerateReqInput":
        return ("generate", None)
    prefix, _, cls_name = name.partition(".")
    if prefix == "openai":
        from sglang.srt.entrypoints.openai import protocol

        cls = getattr(protocol, cls_name, None)
        if is_pydantic(cls):
            return ("openai", cls)
    elif prefix == "api":
        from sglang.api.v1 import api_types

        cls = getattr(api_types, cls_name, None)
        if is_struct(cls) and hasattr(cls, "from_json_value"):
            return ("api", cls)
    elif prefix == "kit" and cls_name in KIT_MODELS:
        return ("kit", KIT_MODELS[cls_name])
    raise KeyError(f"unknown model {name!r} (GenerateReqInput, openai.<Class>, api.<Class>, kit.{'|'.join(KIT_MODELS)})")


def is_request(name):
    return name == "GenerateReqInput" or name.endswith("Request")


def validate(name, body):
    """(errors, ignored) for one body."""
    kind, cls = resolve(name)
    if kind == "generate":
        return check_generate_request(body), []
    if kind == "openai":
        return check_pydantic(cls, body, strict_extras=not is_request(name))
    if kind == "api":
        return check_api(cls, body)
    return check_kit(cls, body)


def answer(item):
    rid = item.get("id")
    try:
        errors, ignored = validate(item["model"], item["body"])
    except Exception as e:  # the kit's own failure, reported per line
        return {"id": rid, "ok": False, "errors": [f"kit: {type(e).__name__}: {e}"], "ignored": []}
    return {"id": rid, "ok": not errors, "errors": errors, "ignored": ignored}


def main(args):
    if args == ["--batch"]:
        for line in sys.stdin:
            if line.strip():
                print(json.dumps(answer(json.loads(line))), flush=True)
        return 0
    if len(args) not in (1, 2):
        print("usage: validate MODEL [JSON] | validate --batch", file=sys.stderr)
        return 2
    body = json.loads(args[1] if len(args) == 2 else sys.stdin.read())
    result = answer({"id": None, "model": args[0], "body": body})
    print(json.dumps(result))
    return 0 if result["ok"] else 1
