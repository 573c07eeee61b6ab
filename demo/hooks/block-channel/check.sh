#!/bin/sh
# Denies the request tool's calls to the billing API's announcements
# channel; everything else is allowed unchanged (empty output).
input=$(cat)
case "$input" in
  *'"endpoint":"/announcements'*)
    printf '{"decision":"deny","reason":"the announcements channel is closed to the agent"}\n' ;;
esac
