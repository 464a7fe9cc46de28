// A runtime's address as a URL: an IPv6 pod IP goes in brackets (http://[fd00::5]:30000).

export function formatHost(ip: string): string {
  return ip.includes(':') ? `[${ip}]` : ip;
}

export function buildEndpointUrl(ip: string, port: number): string {
  return `http://${formatHost(ip)}:${port}`;
}
