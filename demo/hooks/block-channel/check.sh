#!/bin/sh
# Denies the request tool's calls to the billing API's announcements
# channel; everything else is allowed unchanged (empty output).
#
# It decides on the parsed endpoint, never on the text of stdin: the model
# may write the same path many ways (/Announcements, announcements,
# /%61nnouncements, "\/announcements"), and the words may appear anywhere
# else in the arguments. jq reads the JSON; the endpoint's first segment is
# percent-decoded and compared without regard to case. A hook that cannot
# read its input fails, and a failing hook denies (fail_policy "closed").
command -v jq >/dev/null 2>&1 || { echo "block-channel: jq is needed to read the request" >&2; exit 2; }
exec jq -c '
  def pct: gsub("%(?<h>[0-9A-Fa-f]{2})"; .h | ascii_downcase | explode
    | map(if . >= 97 then . - 87 else . - 48 end) | [.[0] * 16 + .[1]] | implode);
  .arguments.endpoint as $e
  | if ($e | type) == "string" and ($e | ltrimstr("/") | split("/")[0] | pct | ascii_downcase) == "announcements"
    then {decision: "deny", reason: "the announcements channel is closed to the agent"}
    else empty end'
