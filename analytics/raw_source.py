"""What analytics' Python data sources share: rows in the raw schema (analytics.schemas.
RAW_SCHEMA), one Spark input partition per planned item, and a read of one item per task.

The sources differ only in where records come from: analytics.source plans offset ranges of
a topic and reads them from the cluster, analytics.spool plans spool files and reads their
lines. Each subclasses RawDataSource (its format name) and ItemReader (how one item is read).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from pyspark.sql.datasource import DataSource, InputPartition
from pyspark.sql.types import StructType

from analytics.schemas import RAW_SCHEMA

T = TypeVar("T")


class RawDataSource(DataSource):
    """A data source of RAW_SCHEMA rows, `format(format_name)` once registered."""

    format_name: ClassVar[str]

    @classmethod
    def name(cls) -> str:
        return cls.format_name

    def schema(self) -> StructType:
        return RAW_SCHEMA


class ItemPartition(InputPartition, Generic[T]):
    """One planned item (an offset range, a file): what one Spark task reads."""

    def __init__(self, item: T) -> None:
        super().__init__(item)
        self.item = item


class ItemReader(Generic[T]):
    """The read side shared by batch and stream readers: partitions wrap the planned items,
    `read` reads one item (mixed in before Spark's reader base classes)."""

    @staticmethod
    def item_partitions(items: Iterable[T]) -> Sequence[InputPartition]:
        return [ItemPartition(item) for item in items]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        # With nothing planned (empty topics, no files) Spark still runs one task, on a
        # partition of its own: it reads nothing.
        if isinstance(partition, ItemPartition):
            yield from self.read_item(partition.item)

    @abstractmethod
    def read_item(self, item: T) -> Iterator[Any]:
        """The rows (tuples) or Arrow record batches of one planned item."""
