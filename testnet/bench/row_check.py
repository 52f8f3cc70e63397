"""The exactly-once check of a Spark publishing benchmark: what one subscriber got, row by row.

The benchmark's DataFrame has rows ``0 .. rows - 1``, row ``i`` being ``i`` as ten zero-padded
digits followed by filler (``row_value``), so a row names itself and every received row can be
matched to the one that was written. ``check_rows`` unpacks a subscriber's packets
(``overlay.spark.unpack``, the framing subscribers use) and counts, against that list:

* *lost*: rows written and never received;
* *duplicated*: receptions beyond the first of a row (a row received three times counts 2);
* *foreign*: rows that are not one of the rows written (a wrong id, wrong filler or a null),
  and packets that are not packets of rows at all.

Packet numbers are checked apart from rows, because they tell two faults apart: a gap in the
numbers (``packet_gaps``, counted from the lowest to the highest number received) is a packet
the overlay ordered and did not deliver, while rows lost with no gap were never stored at the
root, a fault of the publisher. ``missed`` counts packets a subscriber was told it missed.

Pure and without Spark or Arrow, so it is tested on hand-built packets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice

from overlay.spark import PackingError, unpack

ID_DIGITS = 10  # the zero-padded id at the start of each row: room for any int32 row count
FILLER = b"x"
EXAMPLES = 5  # lost or duplicated ids a report lists, enough to tell a pattern


def row_value(row: int, row_bytes: int) -> bytes:
    """Row ``row`` of the benchmark's DataFrame, as the sink publishes it."""
    return str(row).zfill(ID_DIGITS).encode() + FILLER * (row_bytes - ID_DIGITS)


@dataclass(frozen=True, slots=True)
class RowCheck:
    """One subscriber's deliveries of one write, against the rows written."""

    expected: int  # rows written
    packets: int  # data packets received
    rows: int  # rows in them
    lost: int
    duplicated: int
    foreign: int
    packet_gaps: int  # packet numbers missing between the first and last received
    packet_repeats: int  # packet numbers received more than once
    missed: int  # packets the node said were gone
    lost_examples: tuple[int, ...]
    duplicated_examples: tuple[int, ...]

    @property
    def exactly_once(self) -> bool:
        return not (self.lost or self.duplicated or self.foreign or self.missed)


def check_rows(
    packets: Iterable[tuple[int, bytes]], expected: int, row_bytes: int, missed: int = 0
) -> RowCheck:
    """Check ``packets`` ((number, data) pairs, as delivered) against rows ``0 .. expected-1``
    of ``row_bytes`` bytes each."""
    seen: Counter[int] = Counter()
    numbers: Counter[int] = Counter()
    rows = foreign = count = 0
    for number, data in packets:
        count += 1
        numbers[number] += 1
        try:
            records = unpack(data)
        except PackingError:
            foreign += 1
            continue
        for record in records:
            rows += 1
            row = _row_of(record.value, expected, row_bytes)
            if row is None:
                foreign += 1
            else:
                seen[row] += 1
    lost_examples = tuple(islice((i for i in range(expected) if i not in seen), EXAMPLES))
    lost = expected - len(seen)
    doubled = sorted(i for i, n in seen.items() if n > 1)
    gaps = (max(numbers) - min(numbers) + 1 - len(numbers)) if numbers else 0
    return RowCheck(
        expected=expected,
        packets=count,
        rows=rows,
        lost=lost,
        duplicated=sum(n - 1 for n in seen.values()),
        foreign=foreign,
        packet_gaps=gaps,
        packet_repeats=sum(n - 1 for n in numbers.values()),
        missed=missed,
        lost_examples=lost_examples,
        duplicated_examples=tuple(doubled[:EXAMPLES]),
    )


def _row_of(value: bytes | None, expected: int, row_bytes: int) -> int | None:
    """The row ``value`` is, or None if it is none of the rows written."""
    if value is None or len(value) != row_bytes or not value[:ID_DIGITS].isdigit():
        return None
    row = int(value[:ID_DIGITS])
    if row >= expected or value != row_value(row, row_bytes):
        return None
    return row
