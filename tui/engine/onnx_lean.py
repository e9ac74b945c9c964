"""Make a weight-quantised ONNX model cheaper to hold in memory, with bit-identical outputs.

The default model stores its weights as int8 with a float scale, dequantised in the graph
(``Cast(int8) -> Mul(scale)``). ONNX Runtime's constant folding turns every such weight into a
float32 copy at load: the 30522 x 384 word-embedding table alone becomes 47 MB, though a text
only ever reads a few hundred of its rows. This module rewrites, in the model's protobuf bytes,

    Gather(Mul(Cast(Q), S), ids)      with S of shape [rows, 1] (one scale per row)

into ``Mul(Cast(Gather(Q, ids)), Gather(S, ids))``: the same float operations on the same values,
done on the gathered rows only, so the int8 table stays int8 (12 MB) and no float table is ever
built. Matrix weights (read whole by every input) are left to constant folding.

Only the few protobuf fields involved are decoded (no ``onnx`` dependency); everything else is
copied byte for byte. :func:`gather_dequantized_rows` returns ``None`` when the pattern is not
there or the bytes are not understood; the caller then loads the model unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["gather_dequantized_rows"]

# Field numbers from onnx.proto.
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_OUTPUT = 1, 5, 12
_VALUE_INFO_NAME = 1
_NODE_INPUT, _NODE_OUTPUT, _NODE_NAME, _NODE_OP, _NODE_ATTR, _NODE_DOMAIN = 1, 2, 3, 4, 5, 7
_ATTR_NAME, _ATTR_I, _ATTR_TYPE = 1, 3, 20
_ATTR_TYPE_INT = 2
_TENSOR_DIMS, _TENSOR_TYPE, _TENSOR_NAME = 1, 2, 8
_FLOAT, _INT8, _UINT8 = 1, 3, 2

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class _Malformed(ValueError):
    pass


@dataclass
class _Field:
    number: int
    wire: int
    start: int  # of the whole record (tag included), in the parent buffer
    end: int
    value: int | memoryview


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _Malformed("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: memoryview) -> list[_Field]:
    out: list[_Field] = []
    pos = 0
    while pos < len(buf):
        start = pos
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        value: int | memoryview
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
        elif wire == _LEN:
            size, pos = _varint(buf, pos)
            if pos + size > len(buf):
                raise _Malformed("truncated field")
            value, pos = buf[pos : pos + size], pos + size
        elif wire == _I64:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == _I32:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise _Malformed(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise _Malformed("truncated field")
        out.append(_Field(number, wire, start, pos, value))
    return out


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | _LEN) + _encode_varint(len(payload)) + payload


def _varint_field(number: int, value: int) -> bytes:
    return _encode_varint(number << 3 | _VARINT) + _encode_varint(value)


def _text(value: int | memoryview) -> str:
    if not isinstance(value, memoryview):
        raise _Malformed("expected a string")
    return bytes(value).decode("utf-8")


@dataclass
class _Node:
    record: _Field
    op: str = ""
    domain: str = ""
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    ints: dict[str, int] = field(default_factory=dict)
    other_attrs: bool = False


def _node(record: _Field) -> _Node:
    assert isinstance(record.value, memoryview)
    node = _Node(record)
    for f in _fields(record.value):
        if f.number == _NODE_INPUT:
            node.inputs.append(_text(f.value))
        elif f.number == _NODE_OUTPUT:
            node.outputs.append(_text(f.value))
        elif f.number == _NODE_OP:
            node.op = _text(f.value)
        elif f.number == _NODE_DOMAIN:
            node.domain = _text(f.value)
        elif f.number == _NODE_ATTR and isinstance(f.value, memoryview):
            name, value = "", None
            for a in _fields(f.value):
                if a.number == _ATTR_NAME:
                    name = _text(a.value)
                elif a.number == _ATTR_I and isinstance(a.value, int):
                    value = a.value
            if value is None:
                node.other_attrs = True
            else:
                node.ints[name] = value
    return node


def _tensor_info(record: _Field) -> tuple[str, list[int], int]:
    assert isinstance(record.value, memoryview)
    name, dims, dtype = "", [], 0
    for f in _fields(record.value):
        if f.number == _TENSOR_NAME:
            name = _text(f.value)
        elif f.number == _TENSOR_TYPE and isinstance(f.value, int):
            dtype = f.value
        elif f.number == _TENSOR_DIMS:
            if isinstance(f.value, int):
                dims.append(f.value)
            else:  # packed
                pos = 0
                while pos < len(f.value):
                    dim, pos = _varint(f.value, pos)
                    dims.append(dim)
    return name, dims, dtype


def _node_bytes(
    op: str, inputs: list[str], outputs: list[str], name: str, domain: str = "", **ints: int
) -> bytes:
    body = b"".join(_len_field(_NODE_INPUT, i.encode()) for i in inputs)
    body += b"".join(_len_field(_NODE_OUTPUT, o.encode()) for o in outputs)
    body += _len_field(_NODE_NAME, name.encode()) + _len_field(_NODE_OP, op.encode())
    if domain:
        body += _len_field(_NODE_DOMAIN, domain.encode())
    for key, value in ints.items():
        attr = (
            _len_field(_ATTR_NAME, key.encode())
            + _varint_field(_ATTR_I, value)
            + _varint_field(_ATTR_TYPE, _ATTR_TYPE_INT)
        )
        body += _len_field(_NODE_ATTR, attr)
    return _len_field(_GRAPH_NODE, body)


def _graph_outputs(records: list[_Field]) -> set[str]:
    """The names of a graph's outputs, from its records."""
    return {
        _text(f.value)
        for r in records
        if r.number == _GRAPH_OUTPUT and isinstance(r.value, memoryview)
        for f in _fields(r.value)
        if f.number == _VALUE_INFO_NAME
    }


def _rewrite_graph(graph: memoryview) -> tuple[list[bytes | memoryview], int] | None:
    records = _fields(graph)
    nodes = [_node(r) for r in records if r.number == _GRAPH_NODE]
    tensors = {
        name: (dims, dtype)
        for name, dims, dtype in (
            _tensor_info(r) for r in records if r.number == _GRAPH_INITIALIZER
        )
    }
    graph_outputs = _graph_outputs(records)
    producer = {out: n for n in nodes for out in n.outputs}
    uses: dict[str, int] = {}
    for n in nodes:
        for name in n.inputs:
            uses[name] = uses.get(name, 0) + 1

    replaced: dict[int, bytes] = {}  # record start of a Gather -> the nodes replacing it
    dropped: set[int] = set()
    for gather in nodes:
        if gather.op != "Gather" or gather.domain or gather.other_attrs or len(gather.inputs) != 2:
            continue
        if gather.ints.get("axis", 0) != 0 or set(gather.ints) - {"axis"}:
            continue
        table, ids = gather.inputs
        mul = producer.get(table)
        if mul is None or mul.op != "Mul" or mul.domain or len(mul.inputs) != 2:
            continue
        if uses.get(table) != 1 or table in graph_outputs:
            continue
        pairs = [(d, s) for d, s in (mul.inputs, mul.inputs[::-1]) if d in producer]
        if not pairs or producer[pairs[0][0]].op != "Cast":
            continue
        dequantized, scale = pairs[0]
        cast = producer[dequantized]
        if cast.domain or cast.ints != {"to": _FLOAT} or len(cast.inputs) != 1:
            continue
        if uses.get(dequantized) != 1 or dequantized in graph_outputs:
            continue
        quantized = cast.inputs[0]
        if quantized not in tensors or scale not in tensors or quantized in producer:
            continue
        q_dims, q_type = tensors[quantized]
        s_dims, s_type = tensors[scale]
        if q_type not in (_INT8, _UINT8) or s_type != _FLOAT or len(q_dims) != 2:
            continue
        if s_dims != [q_dims[0], 1]:  # one scale per row: gathering rows commutes with Mul
            continue
        stem = f"{table}/memdeck_rows"
        replaced[gather.record.start] = b"".join(
            [
                _node_bytes("Gather", [quantized, ids], [f"{stem}_q"], f"{stem}_gather_q", axis=0),
                _node_bytes(
                    "Gather", [scale, ids], [f"{stem}_scale"], f"{stem}_gather_scale", axis=0
                ),
                _node_bytes("Cast", [f"{stem}_q"], [f"{stem}_f"], f"{stem}_cast", to=_FLOAT),
                _node_bytes("Mul", [f"{stem}_f", f"{stem}_scale"], gather.outputs, f"{stem}_mul"),
            ]
        )
        dropped.update((cast.record.start, mul.record.start))
    if not replaced:
        return None
    pieces: list[bytes | memoryview] = []
    for record in records:
        if record.start in dropped:
            continue
        pieces.append(replaced.get(record.start, graph[record.start : record.end]))
    return pieces, len(replaced)


def _the_graph(model: memoryview) -> tuple[_Field, memoryview] | None:
    """The model's one graph record and its bytes (None: not exactly one)."""
    graphs = [r for r in _fields(model) if r.number == _MODEL_GRAPH and r.wire == _LEN]
    if len(graphs) != 1 or not isinstance(graphs[0].value, memoryview):
        return None
    return graphs[0], graphs[0].value


def _with_graph(
    model: memoryview, graph: _Field, pieces: list[bytes | memoryview], tail: bytes = b""
) -> bytes:
    """``model`` with ``graph``'s record made of ``pieces``, and ``tail`` (more model fields)."""
    head = _encode_varint(_MODEL_GRAPH << 3 | _LEN) + _encode_varint(sum(map(len, pieces)))
    return b"".join([model[: graph.start], head, *pieces, model[graph.end :], tail])


def gather_dequantized_rows(model: bytes) -> tuple[bytes, int] | None:
    """``model`` with row-wise dequantised lookup tables gathered before dequantising.

    Returns the new model bytes and how many tables were rewritten, or ``None`` when nothing
    matched (or the bytes could not be parsed): load the original then.
    """
    view = memoryview(model)
    try:
        found = _the_graph(view)
        if found is None:
            return None
        graph, body = found
        rewritten = _rewrite_graph(body)
    except (_Malformed, UnicodeDecodeError):
        return None
    if rewritten is None:
        return None
    pieces, count = rewritten
    return _with_graph(view, graph, pieces), count
