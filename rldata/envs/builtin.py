"""The built-in environments by name: where each class lives (:data:`rldata.envs.base.REGISTRY`
imports one on its name's first lookup, so listing the names, e.g. for ``--env``'s help at every
command's start-up, imports none of them): add a built-in environment here."""

BUILTIN = {
    "calculator": "rldata.envs.calculator:CalculatorEnv",
    "calculator-tools": "rldata.envs.calculator:CalculatorToolEnv",
    "code-feedback": "rldata.envs.code_feedback:CodeFeedbackEnv",
    "openenv": "rldata.envs.openenv:OpenEnvEnv",
    "openenv-mcp": "rldata.envs.openenv_mcp:OpenEnvMCPEnv",
    "reasoning-gym": "rldata.envs.reasoning_gym:ReasoningGymEnv",
    "single-turn": "rldata.envs.single_turn:SingleTurnEnv",
    "verifiers": "rldata.envs.verifiers_env:VerifiersEnv",
}
