"""`holodesk mcp`: Holodesk as the approval-gated hands of other agents, over the Model Context Protocol.

Every action an agent asks for runs as one step of the one StepEngine, approved by the person on the
approval panel (never by the client). Modules: `act_arguments` (tool arguments to an action, in words when
they are wrong), `one_step` (the proposer and the engine run behind `act`), `tools` (the tools' names,
descriptions and JSON schemas), `server` (the MCP server, stdio or loopback HTTP), `http_auth` (the HTTP
listener's bearer token and loopback check), `host_config` (`--print-config` snippets).
"""
