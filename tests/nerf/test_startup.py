import sys

import pytest
from nerfstudio.configs import external_methods
from nerfstudio.configs.external_methods import ExternalMethodDummyTrainerConfig

import rff_field.nerf.method_configs  # noqa: F401  (the plugin as nerfstudio loads it)
from rff_field.nerf.startup import speed_up_external_method_listing


def test_listing_the_external_methods_walks_no_stack(monkeypatch):
    def no_stack_walk(*args, **kwargs):
        raise AssertionError("inspect.stack was called")

    monkeypatch.setattr(external_methods.inspect, "stack", no_stack_walk)
    configs, descriptions = external_methods.get_external_methods()
    assert len(configs) > 10 and configs.keys() == descriptions.keys()


def test_choosing_an_external_method_still_offers_to_install_it(monkeypatch, capsys):
    speed_up_external_method_listing()  # a second call keeps one wrapper
    assert not getattr(ExternalMethodDummyTrainerConfig.__post_init__.__wrapped__, "rff_field_patched", False)
    method = next(iter(external_methods.external_methods))
    monkeypatch.setattr(external_methods.Confirm, "ask", lambda *args, **kwargs: False)
    with pytest.raises(SystemExit) as exit_info:
        ExternalMethodDummyTrainerConfig(method_name=method.configurations[0][0], method=method)
    assert exit_info.value.code == 0 and "install" in capsys.readouterr().out


@pytest.mark.slow  # four fresh processes that import nerfstudio
def test_startup_timing_measures_both_checks(tmp_path):
    from rff_field.bench.nerf import StartupTiming

    result = StartupTiming(dest=tmp_path, rounds=1).main()
    assert set(result["median_s"]) == {"nerfstudio", "rff_field"} and all(result["median_s"].values())
    assert "| saved per command |" in (tmp_path / "startup.md").read_text()


def test_ns_commands_print_the_configs_help_joined(monkeypatch):
    from tyro import _strings as tyro_strings

    from rff_field.nerf.startup import join_help_lines_in_ns_commands

    monkeypatch.setattr(tyro_strings, "remove_single_line_breaks", tyro_strings.remove_single_line_breaks)
    wrapped = "``paper``: the paper's rule; ``balance``: a named deviation, the rate at which the\n    filter's ..."
    monkeypatch.setattr(sys, "argv", ["/usr/bin/python", "script.py"])
    join_help_lines_in_ns_commands()  # another program: tyro as it is
    assert "\n" in tyro_strings.remove_single_line_breaks(wrapped)
    monkeypatch.setattr(sys, "argv", ["/venv/bin/ns-train", "rff-nerf-lite", "--help"])
    join_help_lines_in_ns_commands()
    joined = "`paper`: the paper's rule; `balance`: a named deviation, the rate at which the filter's ..."
    assert tyro_strings.remove_single_line_breaks(wrapped) == joined
