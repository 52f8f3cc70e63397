"""The one compiled module, optional: without a C compiler the install goes on and the
package uses its pure-Python path (``overlay.compiled_checks``)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("overlay._slotted", ["overlay/_slotted.c"], optional=True)])
