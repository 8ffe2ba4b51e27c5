"""The replicated log and its epoch cache, as pure functions over a tuple of records.

A record's offset is its index in the tuple (LOG-1). The epoch cache (LOG-2) is derived from
the log instead of stored beside it, so it can never disagree with it.
"""

from model.messages import EpochEndOffset, Record

Log = tuple[Record, ...]

NO_EPOCH = EpochEndOffset(Epoch=-1, EndOffset=-1)


def last_epoch(log: Log) -> int:
    """Epoch of the last record; 0 for an empty log (epoch 0 never has records)."""
    return log[-1].Epoch if log else 0


def epoch_cache(log: Log) -> tuple[tuple[int, int], ...]:
    """(epoch, start offset) for each epoch present in the log, in log order (LOG-2, K101-1)."""
    cache: list[tuple[int, int]] = []
    for record in log:
        if not cache or cache[-1][0] != record.Epoch:
            cache.append((record.Epoch, record.Offset))
    return tuple(cache)


def epoch_start(log: Log, epoch: int) -> int | None:
    """Start offset of an epoch in the log, None if the log has no record of it."""
    for cached_epoch, start in epoch_cache(log):
        if cached_epoch == epoch:
            return start
    return None


def end_offset_for_epoch(log: Log, epoch: int, *, strictly_below: bool = False) -> EpochEndOffset:
    """The largest cached epoch <= epoch (or < epoch) and its end offset (K101-2, FETCH-REQ-3A).

    An epoch's end offset is the start of the next larger epoch, or the log end offset for the
    last one. NO_EPOCH (-1, -1) when no such epoch exists.
    """
    found = NO_EPOCH
    cache = epoch_cache(log)
    for index, (cached_epoch, _start) in enumerate(cache):
        if cached_epoch > epoch or (strictly_below and cached_epoch == epoch):
            break
        end = cache[index + 1][1] if index + 1 < len(cache) else len(log)
        found = EpochEndOffset(Epoch=cached_epoch, EndOffset=end)
    return found


def is_consistent(log: Log, fetch_offset: int, last_fetched_epoch: int) -> bool:
    """FETCH-REQ-3: the fetcher's last record (offset FetchOffset-1) has the epoch the leader has there."""
    if fetch_offset == 0:
        return last_fetched_epoch in (0, -1)
    return 0 < fetch_offset <= len(log) and log[fetch_offset - 1].Epoch == last_fetched_epoch


def truncate_diverging(log: Log, diverging: EpochEndOffset, *, own_epochs: bool = False) -> Log:
    """FETCH-RESP-2: drop offsets >= EndOffset and every record of an epoch larger than Epoch;
    with own_epochs (Options.truncate_by_own_epochs), EndOffset counts only where the log holds
    a record of Epoch."""
    bounded = not own_epochs or any(record.Epoch == diverging.Epoch for record in log)
    cut = min(diverging.EndOffset, len(log)) if bounded else len(log)
    for record in log[:cut]:
        if record.Epoch > diverging.Epoch:
            cut = record.Offset
            break
    return log[:cut]


def is_up_to_date(candidate_last_epoch: int, candidate_last_offset: int, log: Log) -> bool:
    """VOTE-LOG-1: the candidate's last (epoch, offset) is at least the voter's last (epoch, offset)."""
    return (candidate_last_epoch, candidate_last_offset) >= (last_epoch(log), len(log) - 1)


def append(log: Log, epoch: int, value: object) -> Log:
    """The log with one more record, written by a leader of `epoch`."""
    return log + (Record(Offset=len(log), Epoch=epoch, Value=value),)
