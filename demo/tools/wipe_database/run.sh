#!/bin/sh
# wipe_database: llm_callable is false, so the model never sees this tool and
# a model call to it is refused as unknown. It wipes nothing anyway.
cat >/dev/null
echo '{"wiped":false,"note":"demo tool: nothing was deleted"}'
