// The local credential under Node (imported by index.js only there): the URL and
// token a client of the user's own should use, found in the remindkit home as the
// Python SDK finds them (remindkit/credential.py). The credential goes only to a URL
// that a running `remindkit api` of this home listens on.
import { lstatSync, readdirSync, readFileSync } from "node:fs";
import { homedir, platform } from "node:os";
import { join } from "node:path";

export function remindkitHome(env = process.env) {
  if (env.REMINDKIT_HOME) return env.REMINDKIT_HOME.replace(/^~(?=$|\/)/, homedir());
  if (platform() === "darwin") return join(homedir(), "Library", "Application Support", "remindkit");
  if (platform() === "win32") return join(env.LOCALAPPDATA ?? join(homedir(), "AppData", "Local"), "remindkit");
  return join(env.XDG_DATA_HOME || join(homedir(), ".local", "share"), "remindkit");
}

function readPrivate(path) {
  let st;
  try {
    st = lstatSync(path);
  } catch {
    return null;
  }
  if (!st.isFile()) return null; // a link or anything else: not ours to trust
  if (typeof process.getuid === "function" && st.uid !== process.getuid()) return null;
  if (platform() !== "win32" && (st.mode & 0o077) !== 0) return null;
  return readFileSync(path, "utf8");
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function origin(url) {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}`.toLowerCase();
  } catch {
    return null;
  }
}

/** The running servers of this home, newest first. */
export function liveServers(home = remindkitHome()) {
  let names = [];
  try {
    names = readdirSync(home).filter((n) => n.startsWith("api-server-") && n.endsWith(".json"));
  } catch {
    return [];
  }
  const found = [];
  for (const name of names) {
    try {
      const info = JSON.parse(readPrivate(join(home, name)) ?? "null");
      if (info && Number.isInteger(info.pid) && alive(info.pid)) found.push(info);
    } catch {
      // a file being replaced, or not ours
    }
  }
  return found.sort((a, b) => (b.started ?? 0) - (a.started ?? 0));
}

/** {url, token} for a client of the user's own (see remindkit/credential.py's discover). */
export function discover(baseUrl, token, env = process.env) {
  const home = remindkitHome(env);
  let url = baseUrl || env.REMINDKIT_API_URL || "";
  if (!url) url = liveServers(home)[0]?.urls?.[0] ?? "http://127.0.0.1:8765";
  if (token === undefined) token = env.REMINDKIT_TOKEN || undefined;
  if (token === undefined) {
    const want = origin(url);
    const ours = liveServers(home).some((s) => (s.urls ?? []).some((u) => origin(u) === want));
    if (ours) {
      const text = readPrivate(join(home, "api-credential"));
      if (text && text.trim().startsWith("rk_local_")) token = text.trim();
    }
  }
  return { url: url.replace(/\/+$/, ""), token };
}

