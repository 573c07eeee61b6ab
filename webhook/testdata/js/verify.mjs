// Reads {"secret", "id", "timestamp", "signature", "body"} JSON lines on
// stdin and prints one line per input: "ok" when the official
// standardwebhooks library verifies the body, else "fail: <reason>".
import { Webhook } from "standardwebhooks";
import { createInterface } from "node:readline";

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  const m = JSON.parse(line);
  try {
    const wh = new Webhook(m.secret);
    wh.verify(m.body, {
      "webhook-id": m.id,
      "webhook-timestamp": m.timestamp,
      "webhook-signature": m.signature,
    });
    console.log("ok");
  } catch (e) {
    console.log("fail: " + e.message);
  }
}
