"""The virtual-keyboard protocol (zwp_virtual_keyboard_manager_v1, version 1) declared for pywayland.

As with the virtual pointer (virtual_pointer_protocol.py), Debian 12 ships no
virtual-keyboard-unstable-v1.xml and pywayland bundles no module for it, so the two interfaces are
written here from the protocol's published request list. Only requests are declared (neither
interface has events); the order of the `request` declarations is the wire opcode:

manager: create_virtual_keyboard(seat: wl_seat, id: new keyboard) = 0.
keyboard: keymap(format, fd, size) = 0, key(time, key, state) = 1,
modifiers(depressed, latched, locked, group) = 2, destroy = 3.
The keymap's format is 1 (XKB v1 text, NUL-terminated, in a file the compositor maps).
"""

from __future__ import annotations

from pywayland.protocol.wayland import WlSeat, WlSeatProxy
from pywayland.protocol_core import Argument, ArgumentType, Global, Interface, Proxy, Resource

MANAGER_NAME = "zwp_virtual_keyboard_manager_v1"
KEYMAP_FORMAT_XKB_V1 = 1


class VirtualKeyboard(Interface):
    """One virtual keyboard device: its keymap, keys and modifier state."""

    name = "zwp_virtual_keyboard_v1"
    version = 1


class VirtualKeyboardProxy(Proxy[VirtualKeyboard]):
    interface = VirtualKeyboard

    @VirtualKeyboard.request(
        Argument(ArgumentType.Uint), Argument(ArgumentType.FileDescriptor), Argument(ArgumentType.Uint)
    )
    def keymap(self, keymap_format: int, fd: int, size: int) -> None:
        self._marshal(0, keymap_format, fd, size)

    @VirtualKeyboard.request(Argument(ArgumentType.Uint), Argument(ArgumentType.Uint), Argument(ArgumentType.Uint))
    def key(self, time: int, key: int, state: int) -> None:
        self._marshal(1, time, key, state)

    @VirtualKeyboard.request(
        Argument(ArgumentType.Uint),
        Argument(ArgumentType.Uint),
        Argument(ArgumentType.Uint),
        Argument(ArgumentType.Uint),
    )
    def modifiers(self, depressed: int, latched: int, locked: int, group: int) -> None:
        self._marshal(2, depressed, latched, locked, group)

    @VirtualKeyboard.request()
    def destroy(self) -> None:
        self._marshal(3)
        self._destroy()


class VirtualKeyboardManager(Interface):
    """The global that makes virtual keyboards on a seat."""

    name = MANAGER_NAME
    version = 1


class VirtualKeyboardManagerProxy(Proxy[VirtualKeyboardManager]):
    interface = VirtualKeyboardManager

    @VirtualKeyboardManager.request(
        Argument(ArgumentType.Object, interface=WlSeat),
        Argument(ArgumentType.NewId, interface=VirtualKeyboard),
    )
    def create_virtual_keyboard(self, seat: WlSeatProxy) -> VirtualKeyboardProxy:
        keyboard: VirtualKeyboardProxy = self._marshal_constructor(0, VirtualKeyboard, seat)
        return keyboard


class _KeyboardResource(Resource[VirtualKeyboard]):
    interface = VirtualKeyboard


class _KeyboardGlobal(Global[VirtualKeyboard]):
    interface = VirtualKeyboard


class _ManagerResource(Resource[VirtualKeyboardManager]):
    interface = VirtualKeyboardManager


class _ManagerGlobal(Global[VirtualKeyboardManager]):
    interface = VirtualKeyboardManager


# pywayland builds the C interface tables from the declarations above (what its generated modules do).
VirtualKeyboard._gen_c()
VirtualKeyboard.proxy_class = VirtualKeyboardProxy
VirtualKeyboard.resource_class = _KeyboardResource
VirtualKeyboard.global_class = _KeyboardGlobal
VirtualKeyboardManager._gen_c()
VirtualKeyboardManager.proxy_class = VirtualKeyboardManagerProxy
VirtualKeyboardManager.resource_class = _ManagerResource
VirtualKeyboardManager.global_class = _ManagerGlobal
