"""The chaos harness's pure parts: the history of what clients did and saw (`history`) and the
checkers that judge it (`checker`). No I/O and no trio here: the harness that runs clients and
faults (issue 6) records into a History and calls the checkers."""
