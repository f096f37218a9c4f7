"""The errors tokdyn raises, one class per exit code of the CLI, all under ``tokdyn.Error``.

Each also derives from the built-in exception code written before them caught (``ValueError`` for
bad input, ``RuntimeError`` for the rest), so ``except ValueError`` keeps working. The C++ core
raises them through its exception translator (apps/python/module.cpp), by the exit code the CLI
would have exited with; the message is the CLI's one line."""


class Error(Exception):
    """Any error of tokdyn. ``exit_code``: the code ``tokdyn run`` exits with for the same failure."""
    exit_code = 1


class InternalError(Error, RuntimeError):
    """A bug in tokdyn (exit code 1): please report it with the message."""
    exit_code = 1


class InputError(Error, ValueError):
    """Bad input: a parameter, a file, a checkpoint, an argument (exit code 2). Nothing was written."""
    exit_code = 2


class ResourceError(Error, RuntimeError):
    """The system refused a resource: disk full, permission, memory (exit code 3)."""
    exit_code = 3


class NonFiniteError(Error, RuntimeError):
    """The state became NaN or Inf; the message says where (exit code 4)."""
    exit_code = 4


class FiguresError(Error, RuntimeError):
    """The results were written but a figure could not be drawn (exit code 5)."""
    exit_code = 5


class BusyError(Error, RuntimeError):
    """Another tokdyn run holds the results folder (exit code 6)."""
    exit_code = 6


class ConvergenceError(Error, RuntimeError):
    """An iteration did not converge within its limits (exit code 7)."""
    exit_code = 7


BY_EXIT_CODE = {c.exit_code: c for c in (InternalError, InputError, ResourceError, NonFiniteError, FiguresError, BusyError,
                                         ConvergenceError)}
