"""The compiled modules, optional: without a C compiler the install goes on and the package
uses its pure-Python paths (``overlay.compiled_checks``, ``overlay.codec``)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("overlay._slotted", ["overlay/_slotted.c"], optional=True),
        Extension("overlay._canonical", ["overlay/_canonical.c"], optional=True),
    ]
)
