"""sdc.lazy: a stand-in imports its module on the first attribute read, then gets out of the way."""

from __future__ import annotations

import colorsys
import types

from sdc.lazy import LazyModule, lazy_import, resolve


def _module_with_stand_in() -> types.ModuleType:
    home = types.ModuleType("lazy_home")
    exec("from sdc.lazy import lazy_import\ncs = lazy_import('colorsys')\n"
         "def hue(r, g, b):\n    return cs.rgb_to_hsv(r, g, b)[0]\n", home.__dict__)
    return home


def test_first_read_rebinds_the_callers_name_to_the_module() -> None:
    home = _module_with_stand_in()
    stand_in = home.cs
    assert isinstance(stand_in, LazyModule)
    assert home.hue(0.0, 1.0, 0.0) == colorsys.rgb_to_hsv(0.0, 1.0, 0.0)[0]
    assert home.cs is colorsys  # later reads in that module no longer go through __getattr__
    assert stand_in.rgb_to_hsv is colorsys.rgb_to_hsv  # a copy kept elsewhere still forwards
    assert "loaded" in repr(stand_in)


def test_resolve_rebinds_too() -> None:
    home = _module_with_stand_in()
    assert resolve(home.cs) is colorsys
    assert home.cs is colorsys
    assert resolve(colorsys) is colorsys


def test_stand_in_made_outside_a_module_body_still_forwards() -> None:
    stand_in = lazy_import("colorsys")  # the caller's globals are this test module's: nothing binds it there
    assert stand_in.hls_to_rgb(0.0, 0.5, 0.0) == colorsys.hls_to_rgb(0.0, 0.5, 0.0)
