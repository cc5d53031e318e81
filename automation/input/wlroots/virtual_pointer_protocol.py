"""The wlr virtual-pointer protocol (zwlr_virtual_pointer_manager_v1, version 1) declared for pywayland.

Debian 12 ships no wlr-virtual-pointer-unstable-v1.xml to generate these from (no wlr-protocols
package; libwlroots-dev has only C headers), and pywayland's bundled protocols do not include it, so
the two interfaces are written here from the protocol's published request list. Only requests are
declared: neither interface has events. The order of the `request` declarations is the wire opcode,
so it must follow the protocol's list exactly:

manager: create_virtual_pointer(seat: wl_seat or null, id: new pointer) = 0, destroy = 1.
pointer: motion(time, dx, dy) = 0, motion_absolute(time, x, y, x_extent, y_extent) = 1,
button(time, button, state) = 2, axis(time, axis, value) = 3, frame = 4, axis_source(source) = 5,
axis_stop(time, axis) = 6, axis_discrete(time, axis, value, discrete) = 7, destroy = 8.
Times are milliseconds, values of axes 1/256 fixed point (pywayland takes floats), buttons Linux
input codes (BTN_LEFT...), states 0 released / 1 pressed, axes 0 vertical / 1 horizontal.
"""

from __future__ import annotations

from pywayland.protocol.wayland import WlSeat, WlSeatProxy
from pywayland.protocol_core import Argument, ArgumentType, Global, Interface, Proxy, Resource

MANAGER_NAME = "zwlr_virtual_pointer_manager_v1"
BUTTON_RELEASED = 0
BUTTON_PRESSED = 1
AXIS_VERTICAL = 0
AXIS_HORIZONTAL = 1
AXIS_SOURCE_WHEEL = 0


class VirtualPointer(Interface):
    """One virtual pointer device: motion, buttons and axes, grouped into frames."""

    name = "zwlr_virtual_pointer_v1"
    version = 1


class VirtualPointerProxy(Proxy[VirtualPointer]):
    interface = VirtualPointer

    @VirtualPointer.request(Argument(ArgumentType.Uint), Argument(ArgumentType.Fixed), Argument(ArgumentType.Fixed))
    def motion(self, time: int, dx: float, dy: float) -> None:
        self._marshal(0, time, dx, dy)

    @VirtualPointer.request(
        Argument(ArgumentType.Uint),
        Argument(ArgumentType.Uint),
        Argument(ArgumentType.Uint),
        Argument(ArgumentType.Uint),
        Argument(ArgumentType.Uint),
    )
    def motion_absolute(self, time: int, x: int, y: int, x_extent: int, y_extent: int) -> None:
        self._marshal(1, time, x, y, x_extent, y_extent)

    @VirtualPointer.request(Argument(ArgumentType.Uint), Argument(ArgumentType.Uint), Argument(ArgumentType.Uint))
    def button(self, time: int, button: int, state: int) -> None:
        self._marshal(2, time, button, state)

    @VirtualPointer.request(Argument(ArgumentType.Uint), Argument(ArgumentType.Uint), Argument(ArgumentType.Fixed))
    def axis(self, time: int, axis: int, value: float) -> None:
        self._marshal(3, time, axis, value)

    @VirtualPointer.request()
    def frame(self) -> None:
        self._marshal(4)

    @VirtualPointer.request(Argument(ArgumentType.Uint))
    def axis_source(self, axis_source: int) -> None:
        self._marshal(5, axis_source)

    @VirtualPointer.request(Argument(ArgumentType.Uint), Argument(ArgumentType.Uint))
    def axis_stop(self, time: int, axis: int) -> None:
        self._marshal(6, time, axis)

    @VirtualPointer.request(
        Argument(ArgumentType.Uint),
        Argument(ArgumentType.Uint),
        Argument(ArgumentType.Fixed),
        Argument(ArgumentType.Int),
    )
    def axis_discrete(self, time: int, axis: int, value: float, discrete: int) -> None:
        self._marshal(7, time, axis, value, discrete)

    @VirtualPointer.request()
    def destroy(self) -> None:
        self._marshal(8)
        self._destroy()


class VirtualPointerManager(Interface):
    """The global that makes virtual pointers on a seat."""

    name = MANAGER_NAME
    version = 1


class VirtualPointerManagerProxy(Proxy[VirtualPointerManager]):
    interface = VirtualPointerManager

    @VirtualPointerManager.request(
        Argument(ArgumentType.Object, interface=WlSeat, nullable=True),
        Argument(ArgumentType.NewId, interface=VirtualPointer),
    )
    def create_virtual_pointer(self, seat: WlSeatProxy | None) -> VirtualPointerProxy:
        pointer: VirtualPointerProxy = self._marshal_constructor(0, VirtualPointer, seat)
        return pointer

    @VirtualPointerManager.request()
    def destroy(self) -> None:
        self._marshal(1)
        self._destroy()


class _PointerResource(Resource[VirtualPointer]):
    interface = VirtualPointer


class _PointerGlobal(Global[VirtualPointer]):
    interface = VirtualPointer


class _ManagerResource(Resource[VirtualPointerManager]):
    interface = VirtualPointerManager


class _ManagerGlobal(Global[VirtualPointerManager]):
    interface = VirtualPointerManager


# pywayland builds the C interface tables from the declarations above (what its generated modules do).
VirtualPointer._gen_c()
VirtualPointer.proxy_class = VirtualPointerProxy
VirtualPointer.resource_class = _PointerResource
VirtualPointer.global_class = _PointerGlobal
VirtualPointerManager._gen_c()
VirtualPointerManager.proxy_class = VirtualPointerManagerProxy
VirtualPointerManager.resource_class = _ManagerResource
VirtualPointerManager.global_class = _ManagerGlobal
