// A WebSocket to the panel that reconnects by itself after a drop.

// Tries again soon, and at most a second apart: a socket dropped by a Redis restart or a panel restart reopens
// within a second of their return (at 10 s apart it took up to 11 s), and one try a second per page costs nothing.
export const retryDelay = (delay) => Math.min(delay * 2, 1000);

export function live(path, onMessage) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  let delay = 500;
  function open() {
    const socket = new WebSocket(`${scheme}://${location.host}${path}`);
    socket.onopen = () => { delay = 500; };
    socket.onmessage = (event) => onMessage(JSON.parse(event.data));
    socket.onclose = (event) => {
      if (event.code === 4401 || event.code === 4403) return;  // not allowed: do not insist
      setTimeout(open, delay);
      delay = retryDelay(delay);
    };
  }
  open();
}
