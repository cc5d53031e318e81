"""Frames of one PipeWire screen-cast stream, read with GStreamer into numpy, the newest kept.

`pipewiresrc fd=.. path=NODE ! videoconvert ! BGRx ! appsink`: the appsink callback runs on
GStreamer's streaming thread and hands the frame to NewestFrame (automation.wayland.newest_frame),
which keeps the newest. Mutter sends frames when the screen changes, so the newest frame is the
current picture however old it is.

GStreamer comes through PyGObject (`gi`), which pip cannot always build: on Debian it is the
python3-gi package; docs/requirements.md ("Wayland") says how a virtual environment reaches it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from holodesk.automation.errors import CaptureError
from holodesk.automation.wayland.newest_frame import NewestFrame

GST_PACKAGES = "python3-gi gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0 gstreamer1.0-pipewire"


def load_gstreamer() -> Any:
    """Gst, initialised; CaptureError naming the packages when it or pipewiresrc is missing."""
    try:
        import gi

        gi.require_version("Gst", "1.0")
        from gi.repository import Gst
    except (ImportError, ValueError) as exc:
        raise CaptureError(
            f"Wayland capture needs GStreamer through PyGObject ({exc}). Install {GST_PACKAGES} and "
            "make `gi` importable in Holodesk's Python (see docs/requirements.md, Wayland)."
        ) from exc
    if not Gst.is_initialized():
        Gst.init(None)
    if Gst.ElementFactory.find("pipewiresrc") is None:
        raise CaptureError("GStreamer has no pipewiresrc element: install gstreamer1.0-pipewire")
    return Gst


class FrameStream(NewestFrame):
    """A running pipeline for one PipeWire node, feeding its frames to NewestFrame's bookkeeping."""

    def __init__(self, pipewire_fd: int, node_id: int) -> None:
        super().__init__(f"PipeWire node {node_id}")
        gst = load_gstreamer()
        self._gst = gst
        self.node_id = node_id
        description = (
            f"pipewiresrc fd={int(pipewire_fd)} path={int(node_id)} always-copy=true do-timestamp=true "
            "! videoconvert ! video/x-raw,format=BGRx "
            "! appsink name=sink emit-signals=true max-buffers=1 drop=true sync=false"
        )
        try:
            self._pipeline = gst.parse_launch(description)
        except Exception as exc:  # GLib.Error
            raise CaptureError(f"cannot build the capture pipeline: {exc}") from exc
        self._ended = ""
        sink = self._pipeline.get_by_name("sink")
        sink.connect("new-sample", self._on_sample)
        if self._pipeline.set_state(gst.State.PLAYING) == gst.StateChangeReturn.FAILURE:
            self.close()
            raise CaptureError(f"the capture pipeline for PipeWire node {node_id} would not start")

    def _on_sample(self, sink: Any) -> Any:
        sample = sink.emit("pull-sample")
        if sample is None:
            return self._gst.FlowReturn.OK
        structure = sample.get_caps().get_structure(0)
        width = structure.get_value("width")
        height = structure.get_value("height")
        buffer = sample.get_buffer()
        ok, info = buffer.map(self._gst.MapFlags.READ)
        if not ok:
            return self._gst.FlowReturn.OK
        try:
            data = np.frombuffer(info.data, dtype=np.uint8)
            stride = data.size // height if height else 0
            if stride < width * 4:
                return self._gst.FlowReturn.OK
            # Copy out of the mapped buffer (GStreamer reuses it) and drop any row padding.
            pixels = data[: stride * height].reshape(height, stride)[:, : width * 4].reshape(height, width, 4).copy()
        finally:
            buffer.unmap(info)
        self.put(pixels)
        return self._gst.FlowReturn.OK

    def source_error(self) -> str:
        return self._pipeline_error()

    def ended(self) -> str:
        """Why the stream stopped (an error, or its end), or "" while it runs; sticky once set."""
        if not self._ended:
            bus = self._pipeline.get_bus()
            kinds = self._gst.MessageType.ERROR | self._gst.MessageType.EOS
            message = bus.pop_filtered(kinds) if bus is not None else None
            if message is not None:
                if message.type == self._gst.MessageType.EOS:
                    self._ended = "the desktop ended it"
                else:
                    error, _debug = message.parse_error()
                    self._ended = str(error.message) or "a PipeWire error"
        return self._ended

    def _pipeline_error(self) -> str:
        bus = self._pipeline.get_bus()
        message = bus.pop_filtered(self._gst.MessageType.ERROR) if bus is not None else None
        if message is None:
            return ""
        error, debug = message.parse_error()
        return f"{error.message} ({debug})" if debug else str(error.message)

    def close(self) -> None:
        self._pipeline.set_state(self._gst.State.NULL)
