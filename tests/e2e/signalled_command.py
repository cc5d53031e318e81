"""`holodesk` with a stop signal sent to itself at one exact moment of a run, for the signal tests.

    python -m tests.e2e.signalled_command MOMENT SIGNAL holodesk-arguments...

The command is the real one (`holodesk.app.cli.main.main`, the real desktop backends); only the
desktop backends are wrapped, so that the process signals itself (os.kill, as another process would)
at MOMENT, which no outside timing could hit reliably:

- `start`: while the desktop is reached during start-up (the model is loaded; no step yet);
- `close`: while the engine gives the input back, after the last step and before the session's end
  record (the engine's first close of the performer);
- `closed`: when the command closes the backends, after the engine wrote the end record;
- `exit`: after the command returned its exit code, as the process is about to exit.

The handler runs in the main thread at its next bytecodes; the loop after each kill gives it those
bytecodes before the run goes on. Exits with the command's exit code.
"""

from __future__ import annotations

import os
import signal
import sys

from holodesk.automation import backends as backends_module
from holodesk.automation.backends import Backends

MOMENTS = ("start", "close", "closed", "exit")


def signal_myself(number: signal.Signals) -> None:
    os.kill(os.getpid(), number)
    for _ in range(10_000):  # the handler runs at one of these bytecodes
        pass


class SignallingBackends(Backends):
    """The real backends; signals the process as the command closes them (after the session's end)."""

    number: signal.Signals = signal.SIGTERM
    moment = ""

    def close(self) -> None:
        if self.moment == "closed":
            signal_myself(self.number)
        super().close()


def main(moment: str, number: signal.Signals, argv: list[str]) -> int:
    from holodesk.app.cli.main import main as holodesk

    real_create = backends_module.create_backends

    def create_backends(*args: object, **kwargs: object) -> Backends:
        if moment == "start":
            signal_myself(number)
        backends = real_create(*args, **kwargs)  # type: ignore[arg-type]
        performer = backends.performer
        real_close = performer.close
        closes = [0]

        def close() -> None:
            closes[0] += 1
            if moment == "close" and closes[0] == 1:  # the engine's, after the last step
                signal_myself(number)
            real_close()

        performer.close = close  # type: ignore[method-assign]
        wrapped = SignallingBackends(backends.capture, performer)
        SignallingBackends.number, SignallingBackends.moment = number, moment
        return wrapped

    backends_module.create_backends = create_backends
    code = holodesk(argv)
    if moment == "exit":
        signal_myself(number)
    return code


if __name__ == "__main__":
    which, name, *rest = sys.argv[1:]
    if which not in MOMENTS:
        raise SystemExit(f"MOMENT is one of {', '.join(MOMENTS)}, not {which!r}")
    sys.exit(main(which, signal.Signals[name], rest))
