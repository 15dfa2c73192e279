#!/bin/bash
# The scenario of this name in scenarios.json: the common checks.
exec bash "$(dirname "$0")/test.sh"
