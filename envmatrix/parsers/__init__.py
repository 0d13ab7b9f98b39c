"""Pure parsers of tool output: tested on recorded real text."""
