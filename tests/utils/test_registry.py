"""The one plug-in registry pattern (litseg.utils.registry)."""

import pytest

from litseg.utils.registry import Registry, UnknownPluginError


def test_register_get_and_unknown_names_list_the_known_ones():
    reg: Registry = Registry("widget")

    @reg.register("a")
    def make_a():
        return "A"

    assert reg.get("a")() == "A"
    assert "a" in reg and "b" not in reg
    with pytest.raises(UnknownPluginError, match="unknown widget 'b'; available: a"):
        reg.get("b")


def test_a_name_registered_twice_is_refused():
    reg: Registry = Registry("widget")
    reg.register("a")(lambda: 1)
    with pytest.raises(ValueError, match="registered twice"):
        reg.register("a")(lambda: 2)


def test_lazy_and_module_attribute_targets_import_on_first_use():
    reg: Registry = Registry("widget")
    reg.register_lazy("dumps", "json:dumps")
    assert reg.get("dumps")([1]) == "[1]"
    assert reg.get("json:loads")("[2]") == [2]
    with pytest.raises(ValueError, match="module:attribute"):
        reg.register_lazy("bad", "json.dumps")


def test_discovery_imports_every_module_of_a_package(tmp_path, monkeypatch):
    pkg = tmp_path / "plugpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from litseg.utils.registry import Registry\nREG = Registry('thing', discover=['plugpkg'])\n")
    (pkg / "one.py").write_text("from plugpkg import REG\n@REG.register('one')\ndef one():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import plugpkg

    assert plugpkg.REG.names() == ["one"]
    assert plugpkg.REG.get("one")() == 1
