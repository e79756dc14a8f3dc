"""Small video clips written by the tests (PyAV, mpeg4): frame k is filled with gray level 10*k, so a test can tell
which frames a sampler took."""

from __future__ import annotations


def make_video(path, seconds, fps=10, width=64, height=48):
    import av
    import numpy as np

    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for k in range(round(seconds * fps)):
            image = np.full((height, width, 3), min(255, 10 * k), dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
