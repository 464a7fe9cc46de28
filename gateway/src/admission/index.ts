export * from './controller.ts';
