// A WebSocket to the panel that reconnects by itself after a drop.
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
      delay = Math.min(delay * 2, 10000);
    };
  }
  open();
}
