"""Removes componentize-py's internal ``exports`` instance from a component.

componentize-py (0.25) leaves in every component it builds a top-level
export named ``exports``: the instance holding the ``init`` function it
called once, at build time, to pre-initialize the interpreter. Nothing
calls it afterwards, but the moat host accepts only components that export
``moat:adapter/adapter`` and nothing else, so the export is removed here.

An export of an instance also adds an instance to the component's instance
index space, so removing it shifts every later instance index down by one.
This module rewrites the few top-level sections that name component
instances after it (aliases, instances, exports); everything else, nested
components included (they have index spaces of their own), is copied byte
for byte. The result is validated by the host when it loads it.
"""

from __future__ import annotations

from dataclasses import dataclass

# Top-level section ids of the component binary format.
_INSTANCE = 5
_ALIAS = 6
_IMPORT = 10
_EXPORT = 11
# The sort byte of component instances.
_SORT_INSTANCE = 0x05
# The sort byte that introduces a core sort (one more byte follows).
_SORT_CORE = 0x00

COMPONENT_PREAMBLE_LAYER = b"\x01\x00"


class StripError(ValueError):
    """The component cannot be rewritten (unexpected or malformed input)."""


@dataclass
class _Reader:
    """A cursor over a byte string, reading the binary format's primitives."""

    data: bytes
    pos: int = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise StripError("unexpected end of section")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def u32(self) -> int:
        result = shift = 0
        while True:
            byte = self.byte()
            result |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return result

    def name(self) -> bytes:
        length = self.u32()
        start = self.pos
        self.pos += length
        if self.pos > len(self.data):
            raise StripError("a name runs past its section")
        return self.data[start : self.pos]

    def done(self) -> bool:
        return self.pos >= len(self.data)


def _u32(value: int) -> bytes:
    """LEB128 encoding of an unsigned integer."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _name(raw: bytes) -> bytes:
    return _u32(len(raw)) + raw


def _extern_name(reader: _Reader) -> tuple[bytes, bytes]:
    """Reads an import or export name; returns (its encoding, the name)."""
    kind = reader.byte()
    if kind not in (0x00, 0x01):
        raise StripError(f"unknown extern name kind {kind:#x}")
    name = reader.name()
    encoded = bytes([kind]) + _name(name)
    if kind == 0x01:
        # A version suffix follows the name.
        suffix = reader.name()
        encoded += _name(suffix)
    return encoded, name


def _sort(reader: _Reader) -> bytes:
    first = reader.byte()
    if first == _SORT_CORE:
        return bytes([first, reader.byte()])
    return bytes([first])


def _extern_desc(reader: _Reader) -> tuple[bytes, int]:
    """Reads an externdesc; returns (its encoding, its sort byte)."""
    start = reader.pos
    kind = reader.byte()
    if kind == 0x00:
        reader.byte()  # 0x11: core module
        reader.u32()
    elif kind in (0x01, 0x04, 0x05):
        reader.u32()
    elif kind == 0x03:
        if reader.byte() == 0x00:
            reader.u32()
    else:
        # Value imports and exports are not produced by componentize-py.
        raise StripError(f"unsupported externdesc kind {kind:#x}")
    return reader.data[start : reader.pos], kind


class _Renumber:
    """Maps instance indices after the removed one down by one."""

    def __init__(self, removed: int | None) -> None:
        self.removed = removed

    def instance(self, index: int) -> int:
        if self.removed is None or index < self.removed:
            return index
        if index == self.removed:
            raise StripError("a later item uses the instance being removed")
        return index - 1

    def sort_index(self, reader: _Reader) -> tuple[bytes, bool]:
        """Reads a sortidx; returns (its rewritten encoding, is-instance)."""
        sort = _sort(reader)
        index = reader.u32()
        is_instance = sort == bytes([_SORT_INSTANCE])
        if is_instance:
            index = self.instance(index)
        return sort + _u32(index), is_instance


def strip_export(component: bytes, export: str = "exports") -> bytes:
    """Returns ``component`` without its top-level instance export ``export``.

    Raises :class:`StripError` when the bytes are not a component or the
    export is missing or not an instance.
    """
    if component[:4] != b"\0asm" or component[6:8] != COMPONENT_PREAMBLE_LAYER:
        raise StripError("not a WebAssembly component")
    target = export.encode()
    out = bytearray(component[:8])
    reader = _Reader(component, 8)
    instances = 0
    renumber = _Renumber(None)
    while not reader.done():
        section_id = reader.byte()
        size = reader.u32()
        start = reader.pos
        reader.pos += size
        body = component[start : reader.pos]
        if section_id == _IMPORT:
            instances += _count_instance_imports(body)
        elif section_id in (_INSTANCE, _ALIAS, _EXPORT):
            body, created, removed_at = _rewrite(section_id, body, renumber, target, instances)
            if removed_at is not None:
                renumber = _Renumber(removed_at)
            instances += created
            if body is None:
                continue  # the section held only the removed export
        out.append(section_id)
        out += _u32(len(body))
        out += body
    if renumber.removed is None:
        raise StripError(f"the component has no instance export named {export!r}")
    return bytes(out)


def _count_instance_imports(body: bytes) -> int:
    reader = _Reader(body)
    count = 0
    for _ in range(reader.u32()):
        _extern_name(reader)
        _, kind = _extern_desc(reader)
        count += kind == _SORT_INSTANCE
    return count


def _rewrite(
    section_id: int, body: bytes, renumber: _Renumber, target: bytes, instances: int
) -> tuple[bytes | None, int, int | None]:
    """Rewrites one instance, alias or export section.

    Returns (the new body, or None when nothing is left of it; the number of
    instances it creates; the index of the removed export's instance, when
    this section held it).
    """
    reader = _Reader(body)
    entries: list[bytes] = []
    created = 0
    removed_at: int | None = None
    for _ in range(reader.u32()):
        if section_id == _INSTANCE:
            entries.append(_instance_entry(reader, renumber))
            created += 1
        elif section_id == _ALIAS:
            entry, is_instance = _alias_entry(reader, renumber)
            entries.append(entry)
            created += is_instance
        else:
            encoded_name, name = _extern_name(reader)
            sort_index, is_instance = renumber.sort_index(reader)
            has_desc = reader.byte()
            desc = _extern_desc(reader)[0] if has_desc else b""
            if name == target and is_instance and removed_at is None and renumber.removed is None:
                removed_at = instances + created
                continue
            entries.append(encoded_name + sort_index + bytes([has_desc]) + desc)
            created += is_instance
    if not reader.done():
        raise StripError(f"trailing bytes in section {section_id}")
    if not entries:
        return None, created, removed_at
    return _u32(len(entries)) + b"".join(entries), created, removed_at


def _instance_entry(reader: _Reader, renumber: _Renumber) -> bytes:
    kind = reader.byte()
    out = bytearray([kind])
    if kind == 0x00:  # instantiate a component with named arguments
        out += _u32(reader.u32())
        count = reader.u32()
        out += _u32(count)
        for _ in range(count):
            out += _name(reader.name())
            out += renumber.sort_index(reader)[0]
    elif kind == 0x01:  # an instance made of inline exports
        count = reader.u32()
        out += _u32(count)
        for _ in range(count):
            out += _extern_name(reader)[0]
            out += renumber.sort_index(reader)[0]
    else:
        raise StripError(f"unknown instance kind {kind:#x}")
    return bytes(out)


def _alias_entry(reader: _Reader, renumber: _Renumber) -> tuple[bytes, bool]:
    sort = _sort(reader)
    target = reader.byte()
    out = bytearray(sort) + bytes([target])
    if target == 0x00:  # an export of a component instance
        out += _u32(renumber.instance(reader.u32()))
        out += _name(reader.name())
    elif target == 0x01:  # an export of a core instance
        out += _u32(reader.u32())
        out += _name(reader.name())
    elif target == 0x02:  # an outer alias
        out += _u32(reader.u32())
        out += _u32(reader.u32())
    else:
        raise StripError(f"unknown alias target {target:#x}")
    return bytes(out), sort == bytes([_SORT_INSTANCE])
