"""Task sources: problems by index, the rule that maps a reset to a row, epoch order."""

from palaestra.tasks.base import Problem, TaskSource, row_for_reset
from palaestra.tasks.epochs import EpochOrder

__all__ = ["EpochOrder", "Problem", "TaskSource", "row_for_reset"]
