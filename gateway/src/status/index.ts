export * from './activity.ts';
export * from './html.ts';
export * from './plugin.ts';
export * from './snapshot.ts';
export * from './view.ts';
export * from './qualification-plots.ts';
