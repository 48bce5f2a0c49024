#!/bin/sh
# Description: spyre-serve against the official OpenAI Python client
# (serve/tests/openai_client_test.py, the venv's pinned `openai`): models,
# completions and chat (plain and streamed), the client's error classes,
# embeddings of all-MiniLM-L6-v2 against sentence-transformers. TAP.
top=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
py=${SPYRE_CACHE:-/var/cache/spyre}/venv/bin/python
if ! [ -x "$py" ] || ! "$py" -c "import openai" 2>/dev/null; then
	echo "1..0 # SKIP no venv with the openai package ($py; make setup)"
	exit 0
fi
HF_HUB_OFFLINE=1 exec "$py" "$top/serve/tests/openai_client_test.py" "$top"
