"""The ram2c section refuses unknown roles, directions, expert calls and unbounded settings."""

import numpy as np
import pytest

from pipelines.ram2c.config import Ram2cConfig


def test_config_refuses_unknown_roles_directions_and_too_many_experts():
    llm = {"default": {"kind": "scripted", "replies": "x"}}
    with pytest.raises(ValueError, match="unknown role 'judge'"):
        Ram2cConfig(llm={**llm, "roles": {"judge": {"kind": "scripted", "replies": "x"}}})
    with pytest.raises(ValueError, match="unknown directions"):
        Ram2cConfig(llm=llm, topics={"directions": ["religion"]})
    with pytest.raises(ValueError, match="experts_per_group 8 > 7 personas of group T"):
        Ram2cConfig(llm=llm, experts_per_group=8)
    assert Ram2cConfig(llm=llm, experts_per_group=7)  # the paper's Fig. 4 shows 3, 5 and 7 voters
    assert np.isclose(Ram2cConfig(llm=llm).reflection.accept_share, 0.5)


def test_config_refuses_unknown_expert_calls_and_unbounded_analyses():
    llm = {"default": {"kind": "scripted", "replies": "x"}}
    assert Ram2cConfig(llm=llm).expert_call == "joint" and Ram2cConfig(llm=llm).analysis_chars == 600
    with pytest.raises(ValueError, match="expert_call\n  Input should be 'joint' or 'separate'"):
        Ram2cConfig(llm=llm, expert_call="both")
    with pytest.raises(ValueError, match="analysis_chars\n  Input should be greater than or equal to 40"):
        Ram2cConfig(llm=llm, analysis_chars=10)
    with pytest.raises(ValueError, match="max_tokens.analyst_revisor"):
        Ram2cConfig(llm=llm, max_tokens={"analyst_revisor": 100})
