"""`m3 report`: a memory as one offline HTML page (timeline, character cards, answers, search, graphs)."""

from m3cli.stages.report.build import ReportStats, write_report
from m3cli.stages.report.gather import parse_range
from m3cli.stages.report.records import ReportLimits

__all__ = ["ReportLimits", "ReportStats", "parse_range", "write_report"]
