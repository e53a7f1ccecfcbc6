"""tom replay: a finished run read back from its traces and outputs, drawn again or written for ShiViz."""
