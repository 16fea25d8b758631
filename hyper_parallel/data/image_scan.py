"""The start-up check of image-text chat records: each rank reads its share, all ranks agree.

A record that cannot become a sample -- a missing or unreadable image, a text that encodes to a
special id, images that cannot fit the row even at the processor's ``min_pixels`` -- would stop
a loader worker when the sampler first draws it, maybe hours into a run. So every record is
checked before step 1 (:meth:`~.chat_records.ChatRecords.check`: tokens, image headers, the
pixel plan; no image is decoded), and every record that cannot train is reported at once.

The work is divided, not repeated: rank ``r`` of a world of ``W`` checks records ``r, r + W,
r + 2W, ...`` -- the assignment of the ``DistributedSampler`` without shuffle, over the whole
world so tensor- and pipeline-parallel peers do not read the same files -- so the file system
serves each image header once, not once per rank. The ranks then gather what they found (one
``all_gather_object`` of a few lines per rank; on NCCL it runs on the device set at start-up)
and every rank raises the same error, so none is left waiting in a later collective; a rank
whose check itself fails says so to the others before it raises.

With ``data.packing`` the same gather also brings every record's sample length (its tokens,
counted from the image headers' sizes: :attr:`~.chat_records.Checked.length`), four bytes a
record, so every rank plans the same packed rows without reading another rank's images.
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

#: Records a report names (the earliest, in file order); the rest are counted.
MAX_NAMED = 100


@dataclass
class ShareReport:
    """What one rank found in its share (small: it travels to every rank)."""

    #: ``(record index, message, missing file)`` of the share's first :data:`MAX_NAMED` bad
    #: records.
    problems: list[tuple[int, str, bool]] = field(default_factory=list)
    #: Bad records in the share (named or not).
    count: int = 0
    #: Records whose images were planned below the processor's ``max_pixels`` to fit.
    scaled: int = 0
    #: The smallest such budget, in pixels.
    smallest: int | None = None
    #: Image files whose headers the rank read.
    images: int = 0
    #: What stopped the rank's check (an exception of its own, not a record's fault), if any.
    failure: str | None = None
    #: The share's sample lengths, in its order (when asked for: packing), 0 for a bad record.
    lengths: array = field(default_factory=lambda: array("i"))


def world_share() -> tuple[int, int]:
    """``(rank, world size)`` of the default process group; ``(0, 1)`` without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def scan_share(records: Sequence[Any], check: Any, rank: int, world: int,
               lengths: bool = False) -> ShareReport:
    """:class:`ShareReport` of ``check(record)`` (a :class:`~.chat_records.Checked`) over
    records ``rank::world``; with ``lengths``, their sample lengths too."""
    report = ShareReport()
    for index in range(rank, len(records), world):
        found = check(records[index])
        report.images += len(records[index].images)
        if lengths:
            report.lengths.append(found.length or 0)
        if found.problem is not None:
            report.count += 1
            if len(report.problems) < MAX_NAMED:
                report.problems.append((index, found.problem, found.missing))
        elif found.fit is not None and found.fit.scaled:
            report.scaled += 1
            budget = found.fit.max_pixels
            report.smallest = budget if report.smallest is None else min(report.smallest, budget)
    return report


def gather(report: ShareReport, world: int) -> list[ShareReport]:
    """Every rank's report, on every rank (collective over the default group)."""
    if world == 1:
        return [report]
    import torch.distributed as dist

    reports: list[Any] = [None] * world
    dist.all_gather_object(reports, report)
    return reports


def check_records(records: Sequence[Any], chat: Any, *, source: str, path_field: str,
                  lengths: bool = False) -> list[int] | None:
    """Check ``records`` (:class:`~.chat_records.ChatRecord`) with ``chat`` before step 1, this
    rank its share (module docstring); raise one error naming every record that cannot train
    (``FileNotFoundError`` when all of them miss an image file, else ``ValueError``), the same
    on every rank. With ``lengths``, return every record's sample length (the same list on
    every rank), else None. A collective: every rank of the default group calls it."""
    rank, world = world_share()
    failure = None
    try:
        mine = scan_share(records, chat.check, rank, world, lengths)
    except Exception as exc:  # noqa: BLE001 - said to every rank, then raised here
        # A rank that raised alone would leave the others waiting in the gather.
        failure, mine = exc, ShareReport(failure=f"{type(exc).__name__}: {exc}")
    reports = gather(mine, world)
    if failure is not None:
        raise failure
    for other, report in enumerate(reports):
        if report.failure is not None:
            raise RuntimeError(f"rank {other} could not check its share of the records of "
                               f"{source!r}: {report.failure}")
    count = sum(r.count for r in reports)
    if count:
        problems = sorted(p for r in reports for p in r.problems)[:MAX_NAMED]
        lines = [message for _, message, _ in problems]
        if count > len(lines):
            lines.append(f"... and {count - len(lines)} more")
        too_long = any("cannot be cut without splitting an image" in m for m in lines)
        fix = ("fix or remove these records" + (
            f", or raise {chat.length_field} or lower the image processor's min_pixels "
            "(processor_path's preprocessor_config.json) for records too long for a row"
            if too_long else ""))
        message = (f"{path_field}={source!r}: {count} of {len(records)} records cannot be "
                   f"trained (found before step 1; no image was decoded):\n  "
                   + "\n  ".join(lines) + f"\n{fix}")
        if all(missing for r in reports for _, _, missing in r.problems) and count == len(
                problems):
            raise FileNotFoundError(message)
        raise ValueError(message)
    scaled = sum(r.scaled for r in reports)
    if scaled and rank == 0:
        smallest = min(r.smallest for r in reports if r.smallest is not None)
        logger.warning(
            "%s: %d of %d records have their images resized below the image processor's "
            "max_pixels (down to %d pixels) so that text and images fit %s=%d; raise it to "
            "train them at the full resolution", source, scaled, len(records), smallest,
            chat.length_field, chat.max_seq_len)
    if not lengths:
        return None
    every = [0] * len(records)
    for share, report in enumerate(reports):
        every[share::world] = report.lengths  # rank r checked records r, r + W, ...
    return every


__all__ = ["MAX_NAMED", "ShareReport", "check_records", "gather", "scan_share", "world_share"]
