"""A verifier prompts file with a wrong-typed field is refused when it is read, before any model loads."""

import json

import pytest

from rlce_trl.evidence.prompt_set import load_prompts


@pytest.mark.parametrize("content, needle", [
    ({"system": 3}, "`system` must be a string"),
    ({"validation": ["a list"]}, "`validation` must be a string"),
    ({"construction": "no slots"}, "needs the slot {favoured}"),
    ({"examples": [{"kind": "validation", "context": 1, "test": "t", "verdict": "yes"}]},
     "needs string fields context"),
])
def test_wrong_typed_fields_are_named(tmp_path, content, needle):
    path = tmp_path / "prompts.json"
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError, match="Invalid verifier prompts") as error:
        load_prompts(path)
    assert needle in str(error.value) and "\n" not in str(error.value)
