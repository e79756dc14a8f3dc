"""One word, one meaning: the task a shipped recipe trains on (`Recipe.task`) is a name of the task registry."""

from rlce_trl.data.tasks import get_task
from rlce_trl.training.recipes import list_recipes, load_recipe


def test_every_recipe_names_a_registered_task():
    for path in list_recipes():
        recipe = load_recipe(path)
        assert get_task(recipe.task).name == recipe.task, path.name
    assert load_recipe("elect_numbered_evidence").task == "numbered_evidence"
