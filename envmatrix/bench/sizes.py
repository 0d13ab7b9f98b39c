"""Size sweeps like nccl-tests' -b/-e/-f/-i, and human sizes (64M, 1G, 8K)."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from envmatrix import values
from envmatrix.errors import ConfigError


def parse_size(value: Any, where: str = "size") -> int:
    return values.size(where, value)


def format_size(n: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return f"{n}B"


# Every rank is told the sweep in its probe spec (one environment variable, at most 128 KiB on Linux); nccl-tests'
# own sweeps have tens of sizes
MAX_SIZES = 4096


#: the names size_sweep's messages give its arguments unless the caller says how the user wrote them
SWEEP_KEYS = {"min_bytes": "bench.min_bytes", "max_bytes": "bench.max_bytes", "factor": "bench.factor",
              "step_bytes": "bench.step_bytes"}


def size_sweep(min_bytes: int, max_bytes: int, factor: Optional[float] = 2.0, step_bytes: Optional[int] = None,
               keys: Mapping[str, str] = SWEEP_KEYS) -> list[int]:
    """Sizes from min to max by a multiplicative factor or an additive step (nccl-tests -f / -i); ``keys`` name the
    four arguments as given (``probe.bench.min_bytes``, ``-b/--min-bytes``)."""
    low, high, grow, step = (keys[k] for k in ("min_bytes", "max_bytes", "factor", "step_bytes"))
    if min_bytes > max_bytes:
        raise ConfigError(f"{low} {format_size(min_bytes)} > {high} {format_size(max_bytes)}; allowed: {low} <= {high}")
    if step_bytes:
        count = (max_bytes - min_bytes) // step_bytes + 1
        if count > MAX_SIZES:
            raise ConfigError(f"{step}: {step_bytes} steps {count} sizes from {min_bytes} to {max_bytes}; allowed: at "
                              f"most {MAX_SIZES} sizes (a step of at least {-(-(max_bytes - min_bytes) // (MAX_SIZES - 1))})")
        return list(range(min_bytes, max_bytes + 1, step_bytes))
    if factor is None or factor <= 1:
        raise ConfigError(f"{grow}: {factor!r} not allowed; allowed: a number > 1 (or give {step})")
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        grown = int(size * factor)
        if grown <= size or len(sizes) >= MAX_SIZES and grown <= max_bytes:
            # int(8 * 1.01) is 8: such a factor never gets past the smallest sizes
            raise ConfigError(f"{grow}: {factor:.10g} from {min_bytes} " + (f"never grows past {size} bytes" if grown <= size
                              else f"takes more than {MAX_SIZES} sizes to reach {max_bytes}")
                              + f"; allowed: a factor that reaches {high} in at most {MAX_SIZES} sizes (e.g. 2)")
        size = grown
    return sizes


def warmup_sweep(sizes: list[int], max_bytes: int = 0) -> list[int]:
    """The sizes nccl-tests warms up before it times any (its TimeTest): the smallest swept size, doubling, up to
    -e (``max_bytes``, else the largest swept size), whatever -f/-i the sweep itself steps by."""
    if not sizes:
        return []
    warm, size, largest = [], min(sizes), max(max(sizes), max_bytes)
    while size <= largest:
        warm.append(size)
        size *= 2
    return warm


DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4}  # the bench's dtypes (probes.builtin.DTYPES) and sizes
# per dtype, the integer up to which every integer is exact: the value check keeps a reduction's sums below it
EXACT_INTEGERS = {"float32": 2**24, "float16": 2**11, "bfloat16": 2**8, "int32": 2**31 - 1}


def aligned_count(size_bytes: int, type_size: int, ranks: int, split_by_ranks: bool) -> int:
    """Element count nccl-tests would use: rounded down to a multiple of n where chunks are per rank."""
    count = max(1, size_bytes // type_size)
    if split_by_ranks:
        count = max(ranks, count // ranks * ranks)
    return count


def measured_bytes(collective: str, size_bytes: int, dtype: Any, ranks: int) -> int:
    """The bytes a swept size is measured at: nccl-tests' element count, a multiple of the ranks where chunks are per
    rank (10K of reduce_scatter on 3 ranks is 10236 B), so a size asked for finds its row; as asked for where the
    dtype is not the bench's own (a parsed nccl-tests row) or no rank count is known (a result without rank records)."""
    from envmatrix.bench.formulas import collective_spec

    item = DTYPE_BYTES.get(str(dtype))
    if item is None or ranks < 1:
        return size_bytes
    return aligned_count(size_bytes, item, ranks, collective_spec(collective).split_by_ranks) * item


def printed_count(total_count: int, ranks: int, split_by_ranks: bool) -> int:
    """The ``count`` column nccl-tests prints for a buffer of ``total_count`` elements: its per-rank count (paramcount)
    where chunks are per rank (all_gather, reduce_scatter, alltoall), so builtin rows and parsed nccl-tests rows mean
    the same."""
    return total_count // ranks if split_by_ranks else total_count
