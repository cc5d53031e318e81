"""A test-only stand-in for the part of torchvision the stand-in checkpoint's image processor uses.

The real checkpoint's image processor imports `torchvision.transforms` and calls `Resize` (bicubic)
and `ToTensor` on PIL images; for PIL input torchvision does exactly this with PIL and numpy. It
exists because the only torchvision wheel the test machines can install is the CUDA build, which
fails to import against the CPU torch the tests use ("operator torchvision::nms does not exist").
It sits at the end of sys.path: an installed, working torchvision wins.
"""

__version__ = "0.0.0+holodesk.tests"
