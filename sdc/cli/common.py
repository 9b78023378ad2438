"""What every sdc command shares: errors as one clean line, tracebacks only on request."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Callable, Sequence

from sdc.diagnostics import PipelineError, SdcError


class UsageError(Exception):
    """A bad command line: exit status 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with `error: ...` on one line and exit status 2."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        self.print_usage(sys.stderr)
        sys.stderr.write(f"error: {message}\n")
        sys.exit(2)


class _VersionAction(argparse.Action):
    """`--version`: print `text()` and exit 0. The text is computed only when the flag is given."""

    def __init__(self, option_strings: Sequence[str], dest: str, text: Callable[[], str], **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version and exit", **kwargs)
        self.text = text

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        sys.stdout.write(self.text() + "\n")
        parser.exit(0)


def add_version_flag(parser: argparse.ArgumentParser, text: Callable[[], str]) -> None:
    """Give `parser` a `--version` flag printing `text()` (argparse's own wants the text up front)."""
    parser.add_argument("--version", action=_VersionAction, text=text)


def sdc_version_text() -> str:
    from sdc.version import __version__

    return f"sdc {__version__}"


def debug_enabled(argv: Sequence[str]) -> bool:
    return "--debug" in argv or os.environ.get("SDC_DEBUG", "") not in ("", "0")


def run_main(body: Callable[[list[str]], int], argv: Sequence[str] | None = None) -> int:
    """Run a command body; user errors print `error: ...` and give 1, usage errors 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return body(argv)
    except SdcError as e:
        if debug_enabled(argv):
            traceback.print_exc()
        sys.stderr.write(e.format() + "\n")
        return 1
    except (UsageError, PipelineError) as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # a bug in sdc: still one line unless asked for more
        if debug_enabled(argv):
            traceback.print_exc()
        else:
            sys.stderr.write(f"error: internal error: {type(e).__name__}: {e} (rerun with --debug for a traceback)\n")
        return 1


def read_source(path: str) -> tuple[str, str]:
    """(text, name to report) for a file path or '-' (stdin)."""
    if path == "-":
        try:
            return sys.stdin.read(), "<stdin>"
        except UnicodeDecodeError:
            raise SdcError("cannot read <stdin>: not UTF-8 text") from None
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except FileNotFoundError:
        raise SdcError(f"cannot open '{path}': no such file") from None
    except IsADirectoryError:
        raise SdcError(f"cannot open '{path}': is a directory") from None
    except UnicodeDecodeError:
        raise SdcError(f"cannot read '{path}': not UTF-8 text") from None
    except OSError as e:
        raise SdcError(f"cannot open '{path}': {e.strerror}") from None
