"""Task sources: problems by index, and the rule that maps a reset to a row."""

from palaestra.tasks.base import Problem, TaskSource, row_for_reset

__all__ = ["Problem", "TaskSource", "row_for_reset"]
