// Shared by the protocol test scripts: a fetch that records every frame of
// each response as the server sent it, and the result printed for the Go test.

// recordingFetch returns a fetch that tees each response body and parses
// its "data: " frames into record.frames (raw strings, in order).
export function recordingFetch(record) {
  return async (url, init) => {
    const res = await fetch(url, init);
    record.status = res.status;
    record.headers = Object.fromEntries(res.headers.entries());
    if (!res.body) return res;
    const [mine, theirs] = res.body.tee();
    record.done = collect(mine, record);
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

async function collect(stream, record) {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  record.frames ??= [];
  record.raw ??= "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    record.raw += value;
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of block.split("\n")) {
        if (line.startsWith("data: ")) record.frames.push(line.slice(6));
      }
    }
  }
}

export function env() {
  const url = process.env.AGENTD_URL;
  const key = process.env.AGENTD_KEY || "";
  if (!url) throw new Error("AGENTD_URL is not set");
  return { url, headers: key ? { Authorization: `Bearer ${key}` } : {} };
}

export function print(result) {
  process.stdout.write(JSON.stringify(result) + "\n");
}

// A deadline for the whole script: a broken server fails, never hangs.
export function deadline(ms = 60000) {
  setTimeout(() => {
    print({ fatal: `script deadline of ${ms} ms passed` });
    process.exit(2);
  }, ms).unref();
}
