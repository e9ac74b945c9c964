"""memdeck's memory served to other programs (``memdeck mcp``). Imports no Textual."""
