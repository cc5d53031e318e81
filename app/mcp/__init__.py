"""`holodesk mcp`: Holodesk as the approval-gated hands of other agents, over the Model Context Protocol.

Every action an agent asks for runs as a run of the one StepEngine, approved by the person on the
approval panel (never by the client). Modules: `act_arguments` (tool arguments to an action, in words when
they are wrong), `one_step` (the proposer and the engine run behind `act`, one run at a time),
`routine_run` and `agent_task` (`run_routine`, `run_task` as engine runs), `own_windows` (acts aimed at
Holodesk's own windows refused), `desk` (the tools' synchronous side), `tools` (names, descriptions, JSON
schemas), `server` (the handlers on the SDK's Server), `progress` (engine events as progress
notifications), `transports` (stdio, loopback HTTP), `http_auth` (the HTTP gate), `host_config`
(`--print-config` snippets), `command` (the subcommand). The approval UI is app/gui/mcp_host.py.
"""
