"""Mutter run in this process through its own library, with a hand on its keyboard layouts, for tests.

A bare `mutter` always has the one layout it is built with ("us"): in a GNOME session it is
gnome-shell that reads org.gnome.desktop.input-sources and gives mutter the layouts and the active
one (Meta.Backend.set_keymap and lock_layout_group), and mutter has no D-Bus method for either. This
script is mutter with those two calls reachable from the test: it takes mutter's own command line,
starts the compositor as the `mutter` binary does, and reads commands on stdin:
  keymap LAYOUTS GROUP   e.g. "keymap us,ru 1": the layouts, and the active one counted from 0
Each command is answered on stdout with "keymap LAYOUTS GROUP" once mutter was given it.

It needs Debian's python3-gi and gir1.2-mutter-11 (the `Meta` typelib), so it runs under the
system Python with GI_TYPELIB_PATH naming the typelib's folder (bench/rigs/gnome_stack.py
starts it so with `layouts_hand=True`).
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import gi

    gi.require_version("Meta", "11")
    from gi.repository import GLib, Meta

    context = Meta.create_context("holodesk-test-mutter")
    configured, _ = context.configure(argv)
    if not configured:
        return 2
    context.set_plugin_name("libdefault")  # the `mutter` binary's own plugin
    context.setup()
    context.start()
    context.notify_ready()
    backend = context.get_backend()

    def on_command(channel: GLib.IOChannel, condition: GLib.IOCondition) -> bool:
        line = sys.stdin.readline()
        if not line:  # the test closed its end: keep running until terminated
            return False
        words = line.split()
        if len(words) == 3 and words[0] == "keymap":
            backend.set_keymap(words[1], "", "")
            backend.lock_layout_group(int(words[2]))
            print(f"keymap {words[1]} {words[2]}", flush=True)
        else:
            print(f"error: unknown command {line.strip()!r}", flush=True)
        return True

    GLib.io_add_watch(GLib.IOChannel.unix_new(sys.stdin.fileno()), GLib.PRIORITY_DEFAULT, GLib.IO_IN, on_command)
    context.run_main_loop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
